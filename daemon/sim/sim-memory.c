/* SPDX-License-Identifier: MIT */
/*
 * Buffer objects, KFD memory handles and the GPU VM of the simulated GPU
 * (kfd_chardev.c memory ioctls, amdgpu_amdkfd_gpuvm.c, amdgpu_vm.c
 * counterparts). See sim-memory.h for the object model.
 *
 * Choices where the simulator cannot or does not follow the kernel exactly:
 *  - DOORBELL and USERPTR allocations return -EOPNOTSUPP: the daemon never
 *    allocates them, and the simulator has no GPU-visible doorbell BAR and
 *    does not pin user pages. MMIO_REMAP is the device's HDP flush page
 *    (sim-cache.h), one 4 KiB BO that every such handle shares; it lives
 *    while a handle holds it, and mmap of the MMIO offset wants one.
 *  - flags must name exactly one of VRAM/GTT/USERPTR/DOORBELL/MMIO_REMAP; the
 *    kernel takes the first in that order, the simulator refuses the
 *    ambiguity with -EINVAL.
 *  - a VA range overlapping another handle of the process on the same GPU
 *    is refused at ALLOC/IMPORT with -EINVAL; the kernel finds the same
 *    conflict one step later, in amdgpu_vm_bo_map ("va ... conflict with
 *    ..."), at MAP. Handles of different GPUs may share a VA (each GPU's VM
 *    is its own); mapping one into a VM where the range is taken is -EINVAL.
 *  - a peer GPU's BO mapped into a VM (MAP_MEMORY_TO_GPU naming another
 *    GPU) is reached at the same memory: the kernel attaches it through a
 *    dma-buf (amdgpu_amdkfd_gpuvm.c kfd_mem_attach: KFD_MEM_ATT_DMABUF for
 *    GTT and VRAM BOs of a peer) and, where the GPUs cannot reach each
 *    other's BAR, migrates a VRAM BO to GTT for it (amdgpu_dma_buf.c:
 *    no peer2peer); the simulator keeps it where it is and keeps charging
 *    it to its own GPU's VRAM.
 *  - an engine access must lie inside one GPU-mapped BO; a range spanning two
 *    adjacent mapped BOs faults (the hardware would follow the page tables).
 *  - a dma-buf is recognised by the (st_dev, st_ino) of its memfd while its
 *    BO has a handle. In the kernel the GEM object outlives its last handle
 *    while a dma-buf fd holds it; here the BO record goes with its last
 *    handle (nothing else would ever free it: the simulator cannot see when
 *    the last fd elsewhere closes) and the memory lives on in the memfd, whose
 *    name carries what an importer needs (BO_NAME_FMT: the device's gpu_id
 *    and random tag, the allocation flags; the size is the memfd's): an
 *    import of such an fd makes a new record for it. A memfd a client made up with that name,
 *    sealed against resizing, is accepted like a foreign dma-buf would be.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "kfd/kfd-uapi.h"
#include "sim-device.h"
#include "sim-memory.h"
#include "sim-populate.h"
#include "sim-process.h"
#include "util/log.h"
#include "util/macro.h"

#define DOMAIN_FLAGS                                                                    \
        (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT |                   \
         KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL |           \
         KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)

/* The name of every BO's memfd (see the top of the file). */
#define BO_NAME_FMT "kfd-bo:%08" PRIx32 ":%08" PRIx32 ":%08" PRIx32 /* gpu_id, bo_tag, flags */

/* DRM_FILE_PAGE_OFFSET_START: fake offsets start above 4 GiB (drm_gem.c). */
#define SIM_DRM_OFFSET_START 0x100000000ULL

SimBo *sim_bo_ref(SimBo *bo) {
        if (bo)
                bo->n_ref++;
        return bo;
}

static SimBo *bo_free(SimBo *bo) {
        if (!bo)
                return NULL;
        if (bo->device) {
                sim_populator_forget(bo->device->populator, bo);
                for (SimBo **b = &bo->device->bos; *b; b = &(*b)->next)
                        if (*b == bo) {
                                *b = bo->next;
                                break;
                        }
                if (bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
                        bo->gpu->info.vram_used -= bo->size;
                if (bo->gpu->mmio_bo == bo)
                        bo->gpu->mmio_bo = NULL;
        }
        sim_cache_bo_free(bo);
        if (bo->host && bo->host != MAP_FAILED)
                munmap(bo->host, bo->size);
        safe_close(bo->memfd);
        free(bo);
        return NULL;
}
DEFINE_POINTER_CLEANUP(SimBo, bo_free);

void sim_bo_unref(SimBo *bo) {
        if (!bo)
                return;
        assert(bo->n_ref > 0);
        if (--bo->n_ref == 0)
                bo_free(bo); /* dma-bufs exported from it keep the memfd: see the top */
}

void sim_device_free_bos(SimDevice *d) {
        while (d->bos)
                bo_free(d->bos);
}

static int range_cmp(const void *a, const void *b) {
        const uint64_t *x = a, *y = b;

        return x[0] < y[0] ? -1 : x[0] > y[0];
}

/*
 * The render-node offset of a new object of size bytes: the best-fitting
 * hole among the device's live objects (drm_gem_create_mmap_offset() ->
 * drm_vma_offset_add() -> drm_mm_insert_node(), DRM_MM_INSERT_BEST), else
 * past the last. An object's range is given back with its last reference
 * (drm_gem_free_mmap_offset() in drm_gem_object_release()), so the kernel
 * hands a freed object's offset to a later one, and so does this (here with
 * the BO record's last handle: see the top): a stale offset of a freed
 * buffer may name another buffer, the daemon's too.
 */
static int drm_offset_for(SimDevice *d, uint64_t size, uint64_t *ret) {
        uint64_t (*live)[2] = NULL, at = SIM_DRM_OFFSET_START, best = UINT64_MAX, best_hole = UINT64_MAX;
        size_t n = 0, i = 0;

        size = ALIGN_UP(size, (uint64_t) PAGE_SIZE_4K);
        for (SimBo *bo = d->bos; bo; bo = bo->next)
                n++;
        if (n > 0) {
                live = calloc(n, sizeof *live);
                if (!live)
                        return -ENOMEM;
                for (SimBo *bo = d->bos; bo; bo = bo->next, i++) {
                        live[i][0] = bo->mmap_offset;
                        live[i][1] = bo->mmap_offset + ALIGN_UP(bo->size, (uint64_t) PAGE_SIZE_4K);
                }
                qsort(live, n, sizeof *live, range_cmp);
        }
        for (i = 0; i < n; i++) {
                if (live[i][0] >= at && live[i][0] - at >= size && live[i][0] - at < best_hole) {
                        best = at;
                        best_hole = live[i][0] - at;
                }
                at = MAX(at, live[i][1]);
        }
        free(live);
        *ret = best != UINT64_MAX ? best : at;
        return 0;
}

/* Maps bo->memfd (size bytes) for the engines, gives it its render-node
 * offset range, links it into d and gives it its GL2 state (fresh: a new,
 * zeroed BO). */
static int bo_attach(SimDevice *d, SimBo *bo, bool fresh) {
        struct stat st;
        int r;

        if (fstat(bo->memfd, &st) < 0)
                return -errno;
        bo->st_dev = st.st_dev;
        bo->st_ino = st.st_ino;
        bo->host = mmap(NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, bo->memfd, 0);
        if (bo->host == MAP_FAILED) {
                bo->host = NULL;
                return -ENOMEM;
        }
        r = drm_offset_for(d, bo->size, &bo->mmap_offset);
        if (r < 0) {
                munmap(bo->host, bo->size);
                bo->host = NULL;
                return r;
        }

        bo->device = d;
        bo->next = d->bos;
        d->bos = bo;
        if (bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
                bo->gpu->info.vram_used += bo->size;
        return sim_cache_bo_init(bo, fresh);
}

int sim_bo_new(SimDevice *d, SimGpu *gpu, uint64_t size, uint32_t flags, SimBo **ret) {
        _cleanup_(bo_freep) SimBo *bo = NULL;
        char name[64];
        int r;

        bo = calloc(1, sizeof *bo);
        if (!bo)
                return -ENOMEM;
        bo->memfd = -EBADF;
        bo->n_ref = 1;
        bo->size = size;
        bo->alloc_flags = flags;
        bo->gpu = gpu;

        snprintf(name, sizeof name, BO_NAME_FMT, gpu->info.gpu_id, d->bo_tag, flags);
        bo->memfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (bo->memfd < 0)
                return -errno;
        if (ftruncate(bo->memfd, (off_t) size) < 0)
                return errno == EFBIG || errno == EINVAL ? -ENOMEM : -errno;
        /* Importers get the same memfd: it must never change size under the engines. */
        if (fcntl(bo->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
                return -errno;
        r = bo_attach(d, bo, true);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(bo);
        return 0;
}

SimBo *sim_device_find_bo_by_offset(SimDevice *d, uint64_t offset, uint64_t length) {
        for (SimBo *bo = d->bos; bo; bo = bo->next)
                if (offset >= bo->mmap_offset && offset - bo->mmap_offset < bo->size)
                        return range_in_bounds(offset - bo->mmap_offset, length, bo->size) ? bo : NULL;
        return NULL;
}

static SimBo *find_bo_by_inode(SimDevice *d, dev_t dev, ino_t ino) {
        for (SimBo *bo = d->bos; bo; bo = bo->next)
                if (bo->st_dev == dev && bo->st_ino == ino)
                        return bo;
        return NULL;
}

/* The BO that exported the dma-buf of that inode, not another GPU's import
 * of it: a dma-buf stays its exporter's once other devices attached it
 * (amdgpu_gem_prime_import(): a dma-buf of amdgpu_dmabuf_ops whose object
 * is of this device is that object, drm_gem_object_get(obj)), so the
 * exporter's GPU imports it again as its own. A foreign BO (import_foreign())
 * if there is no other. */
static SimBo *find_exporter_by_inode(SimDevice *d, dev_t dev, ino_t ino) {
        SimBo *found = NULL;

        for (SimBo *bo = d->bos; bo; bo = bo->next)
                if (bo->st_dev == dev && bo->st_ino == ino) {
                        if (!bo->foreign)
                                return bo;
                        found = found ?: bo;
                }
        return found;
}

void sim_memory_lose_vram(SimDevice *d, SimGpu *gpu) {
        for (SimBo *bo = d->bos; bo; bo = bo->next) {
                if (!(bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) || (gpu && bo->gpu != gpu))
                        continue;
                /* Every mapping of the memfd (the simulator's, clients')
                 * sees the hole: zeros, as fresh VRAM after a reset reads. */
                if (fallocate(bo->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t) bo->size) < 0)
                        log_warning_errno(-errno, "sim: cannot drop the pages of a VRAM BO at the reset: %m");
                bo->populated = false;
                sim_cache_bo_lost(bo);
        }
}

SimMem *sim_process_find_mem(SimProcess *p, uint64_t handle) {
        SimPdd *pdd = sim_process_pdd(p, KFD_HANDLE_GPU_ID(handle));
        uint32_t idr = KFD_HANDLE_IDR(handle);

        if (!pdd || idr >= pdd->n_mems)
                return NULL;
        return pdd->mems[idr];
}

bool sim_process_has_bo(SimProcess *p, SimBo *bo) {
        for (unsigned k = 0; k < p->n_pdds; k++) {
                SimPdd *pdd = p->pdds[k];
                for (uint32_t i = 0; i < pdd->n_mems; i++)
                        if (pdd->mems[i] && pdd->mems[i]->bo == bo)
                                return true;
        }
        return false;
}

static void mem_free(SimMem *m) {
        SimPdd *pdd;

        if (!m)
                return;
        pdd = m->pdd;
        if (m->idr < pdd->n_mems && pdd->mems[m->idr] == m)
                pdd->mems[m->idr] = NULL;
        sim_bo_unref(m->bo);
        free(m);
}

void sim_process_free_mems(SimProcess *p) {
        for (unsigned k = 0; k < p->n_pdds; k++) {
                SimPdd *pdd = p->pdds[k];
                for (uint32_t i = 0; i < pdd->n_mems; i++)
                        mem_free(pdd->mems[i]);
                free(pdd->mems);
                pdd->mems = NULL;
                pdd->n_mems = 0;
        }
}

/* idr_alloc(&pdd->alloc_idr, mem, 0, 0): the lowest free id from 0. */
static int mem_add(SimPdd *pdd, SimBo *bo, uint64_t va, uint32_t flags, SimMem **ret) {
        uint32_t idr;
        SimMem *m;

        for (idr = 0; idr < pdd->n_mems; idr++)
                if (!pdd->mems[idr])
                        break;
        if (idr == pdd->n_mems) {
                uint32_t n = MAX(16u, pdd->n_mems * 2);
                SimMem **a = realloc(pdd->mems, n * sizeof *a);
                if (!a)
                        return -ENOMEM;
                memset(a + pdd->n_mems, 0, (n - pdd->n_mems) * sizeof *a);
                pdd->mems = a;
                pdd->n_mems = n;
        }
        m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        m->bo = sim_bo_ref(bo);
        m->pdd = pdd;
        m->idr = idr;
        m->va = va;
        m->size = bo->size;
        m->flags = flags;
        pdd->mems[idr] = m;
        *ret = m;
        return 0;
}

/* Whether [va, va + size) overlaps another handle of pdd (ALLOC, IMPORT). */
static bool handle_overlaps(SimPdd *pdd, uint64_t va, uint64_t size) {
        for (uint32_t i = 0; i < pdd->n_mems; i++) {
                SimMem *m = pdd->mems[i];
                if (m && va < m->va + m->size && m->va < va + size)
                        return true;
        }
        return false;
}

/* For every SimMem m mapped in vm, of any pdd of its process. */
#define VM_FOREACH(vm, m)                                                                            \
        for (unsigned _k = 0, _bit = 1u << (vm)->gpu->index; _k < (vm)->process->n_pdds; _k++)      \
                for (uint32_t _i = 0; _i < (vm)->process->pdds[_k]->n_mems; _i++)                   \
                        if (((m) = (vm)->process->pdds[_k]->mems[_i]) && ((m)->mapped_on & _bit))

/* Whether [va, va + size) overlaps a mapping of vm other than except (MAP). */
static bool vm_overlaps(SimPdd *vm, uint64_t va, uint64_t size, const SimMem *except) {
        SimMem *m;

        VM_FOREACH(vm, m)
                if (m != except && va < m->va + m->size && m->va < va + size)
                        return true;
        return false;
}

SimMem *sim_vm_lookup(SimPdd *vm, uint64_t va) {
        SimMem *m;

        VM_FOREACH(vm, m)
                if (va >= m->va && va - m->va < m->size)
                        return m;
        return NULL;
}

int sim_vm_access(SimPdd *vm, uint64_t va, uint64_t len, uint8_t **ret_host, uint64_t *ret_fault_va) {
        SimMem *m = sim_vm_lookup(vm, va);

        if (!m) {
                *ret_fault_va = va;
                return -EFAULT;
        }
        if (!range_in_bounds(va - m->va, len, m->size)) {
                *ret_fault_va = m->va + m->size;
                return -EFAULT;
        }
        *ret_host = m->bo->host + (va - m->va);
        return 0;
}

int sim_vm_access_write(SimPdd *vm, uint64_t va, uint64_t len, uint8_t **ret_host, uint64_t *ret_fault_va) {
        int r = sim_vm_access(vm, va, len, ret_host, ret_fault_va);

        if (r >= 0 && sim_vm_read_only(vm, va)) {
                *ret_fault_va = va;
                return -EFAULT;
        }
        return r;
}

bool sim_vm_read_only(SimPdd *vm, uint64_t va) {
        SimMem *m = sim_vm_lookup(vm, va);

        return m && !(m->flags & KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE);
}

int sim_vm_access_bulk_write(SimPdd *vm, uint64_t va, uint64_t len, uint8_t **ret_host, uint64_t *ret_fault_va) {
        int r = sim_vm_access_write(vm, va, len, ret_host, ret_fault_va);

        if (r >= 0)
                sim_bo_populate(sim_vm_lookup(vm, va)->bo);
        return r;
}

static int entry_cmp(const void *a, const void *b) {
        const SimVmEntry *x = a, *y = b;
        return x->va < y->va ? -1 : x->va > y->va;
}

int sim_vm_snapshot_new(SimPdd *vm, SimVmSnapshot *ret) {
        SimVmEntry *e;
        SimMem *m;
        size_t n = 0;

        VM_FOREACH(vm, m)
                n++;
        e = calloc(MAX(n, (size_t) 1), sizeof *e);
        if (!e)
                return -ENOMEM;
        n = 0;
        VM_FOREACH(vm, m) {
                e[n++] = (SimVmEntry) { .va = m->va, .size = m->size, .host = m->bo->host, .bo = sim_bo_ref(m->bo),
                                        .writable = m->flags & KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE };
        }
        /* Mapped ranges never overlap (sim_memory_map refuses it), so the
         * sorted array has at most one candidate for any address. */
        qsort(e, n, sizeof *e, entry_cmp);
        *ret = (SimVmSnapshot) { .entries = e, .n = n };
        return 0;
}

void sim_vm_snapshot_release(SimVmSnapshot *s) {
        for (size_t i = 0; i < s->n; i++)
                sim_bo_unref(s->entries[i].bo);
        free(s->entries);
        *s = (SimVmSnapshot) {};
}

int sim_vm_snapshot_find(const SimVmSnapshot *s, uint64_t va, uint64_t len, const SimVmEntry **ret_entry,
                         uint64_t *ret_fault_va) {
        size_t lo = 0, hi = s->n;

        /* The last entry starting at or below va. */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (s->entries[mid].va <= va)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0 || va - s->entries[lo - 1].va >= s->entries[lo - 1].size) {
                *ret_fault_va = va;
                return -EFAULT;
        }
        const SimVmEntry *e = &s->entries[lo - 1];
        if (!range_in_bounds(va - e->va, len, e->size)) {
                *ret_fault_va = e->va + e->size;
                return -EFAULT;
        }
        *ret_entry = e;
        return 0;
}

/* kfd_chardev.c kfd_ioctl_alloc_memory_of_gpu, amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu. */
int sim_memory_alloc(SimProcess *p, struct kfd_ioctl_alloc_memory_of_gpu_args *a) {
        SimDevice *d = p->device;
        SimPdd *pdd;
        SimGpu *g;
        uint32_t domain = a->flags & DOMAIN_FLAGS;
        uint64_t size;
        SimBo *bo;
        SimMem *m;
        int r;

        /* kfd_ioctl_alloc_memory_of_gpu: "if (args->size == 0) return -EINVAL;" */
        if (a->size == 0)
                return -EINVAL;
        /* kfd_process_device_data_by_id() fails -> -EINVAL */
        pdd = sim_process_pdd(p, a->gpu_id);
        if (!pdd)
                return -EINVAL;
        g = pdd->gpu;
        /* amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu: no known domain -> -EINVAL;
         * the simulator also refuses more than one (see the file comment). */
        if (domain == 0 || (domain & (domain - 1)))
                return -EINVAL;
        if (domain & (KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL))
                return -EOPNOTSUPP;
        /* kfd_ioctl_alloc_memory_of_gpu: "if (args->size != PAGE_SIZE) return -EINVAL;" */
        if ((domain & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP) && a->size != PAGE_SIZE_4K)
                return -EINVAL;
        /* kfd_bind_process_to_device: "if (!pdd->drm_priv) return ERR_PTR(-ENODEV);"
         * i.e. ACQUIRE_VM (of that GPU) must come first. */
        if (!pdd->vm_file)
                return -ENODEV;
        /* The BO is created with PAGE_ALIGN(size) (amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu
         * aligned_size; amdgpu_bo_create rounds up to pages). */
        size = align_up_u64(a->size, PAGE_SIZE_4K);
        if (size == 0)
                return -EINVAL;
        /* amdgpu_amdkfd_reserve_mem_limit: "Insufficient memory" -> -ENOMEM,
         * against that GPU's own VRAM. */
        if ((domain & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) && size > g->info.vram_size - g->info.vram_used)
                return -ENOMEM;
        if (a->va_addr + size < a->va_addr || handle_overlaps(pdd, a->va_addr, size))
                return -EINVAL;

        if (domain & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP) {
                r = sim_cache_mmio_bo(g, &bo);
                if (r < 0)
                        return r;
        } else {
                r = sim_bo_new(d, g, size, a->flags, &bo);
                if (r < 0)
                        return r;
        }
        r = mem_add(pdd, bo, a->va_addr, a->flags, &m);
        sim_bo_unref(bo);
        if (r < 0)
                return r;

        a->handle = KFD_MAKE_HANDLE(g->info.gpu_id, m->idr);
        /* "MMIO is mapped through kfd device": the offset of kfd_mmio_mmap. */
        a->mmap_offset = (domain & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)
                                 ? KFD_MMAP_TYPE_MMIO | KFD_MMAP_GPU_ID(g->info.gpu_id)
                                 : bo->mmap_offset;
        log_debug("sim: alloc handle 0x%llx va 0x%llx size 0x%llx flags 0x%x",
                  (unsigned long long) a->handle, (unsigned long long) a->va_addr,
                  (unsigned long long) size, a->flags);
        return 0;
}

/* kfd_ioctl_free_memory_of_gpu, amdgpu_amdkfd_gpuvm_free_memory_of_gpu. */
int sim_memory_free(SimProcess *p, struct kfd_ioctl_free_memory_of_gpu_args *a) {
        SimMem *m;

        /* "Free signal BO is not allowed" */
        if (p->signal_handle && p->signal_handle == a->handle)
                return -EPERM;
        if (!sim_process_pdd(p, KFD_HANDLE_GPU_ID(a->handle)))
                return -EINVAL;
        m = sim_process_find_mem(p, a->handle);
        if (!m)
                return -EINVAL;
        /* "BO VA 0x%llx size 0x%lx is still mapped." -> -EBUSY (in any VM); the handle stays. */
        if (m->mapped_on)
                return -EBUSY;
        mem_free(m);
        return 0;
}

static int map_prologue(SimProcess *p, uint64_t handle, uint64_t ids_ptr, uint32_t n_devices,
                        uint32_t n_success, SimMem **ret) {
        /* kfd_ioctl_map_memory_to_gpu / unmap: "Device IDs array empty" and
         * "n_success exceeds n_devices" -> -EINVAL. */
        if (n_devices == 0)
                return -EINVAL;
        if (n_success > n_devices)
                return -EINVAL;
        if (ids_ptr == 0)
                return -EFAULT;
        SimPdd *pdd = sim_process_pdd(p, KFD_HANDLE_GPU_ID(handle));

        if (!pdd)
                return -EINVAL;
        if (!pdd->vm_file)
                return -ENODEV;
        /* kfd_process_device_translate_handle() fails -> -ENOMEM (sic, kfd_chardev.c). */
        *ret = sim_process_find_mem(p, handle);
        if (!*ret)
                return -ENOMEM;
        return 0;
}

/*
 * Backs every page of a BO the first time an engine writes it. The real device
 * backs a GTT BO when it is validated for a GPU mapping (TTM populates the pages
 * amdgpu binds) and has a VRAM BO's VRAM from its creation; the simulator
 * waits for the first engine write so that a buffer nobody touches — a queue's
 * CWSR area (VRAM, 13.7 MiB on a 40-CU gfx1030), a kernel-argument pool —
 * costs the host nothing, while a big copy still does not pay for faulting
 * its pages in one by one. A GTT BO's memory is backed here, before the
 * engine writes it: MADV_POPULATE_WRITE, best effort (Linux 5.14). A VRAM BO's
 * memory is written only by the GL2 write-back, after the engine has written
 * the view: the device's populator thread backs both (sim-populate.h) while
 * the engine goes on, where doing it here held the device lock for the
 * 0.5-1 s that 256 MiB took (every ioctl and engine of the device waiting).
 * Called under the device lock, like the copy that follows it.
 */
void sim_bo_populate(SimBo *bo) {
        if (bo->populated)
                return;
        bo->populated = true;
        if (bo->cache && bo->device) {
                sim_populator_add(bo->device->populator, bo);
                return;
        }
        (void) madvise(bo->host, bo->size, MADV_POPULATE_WRITE);
}

/* kfd_ioctl_map_memory_to_gpu: the BO goes into the VM of every GPU listed
 * from n_success on (the handle's own and peers'), each of which must have
 * its VM (kfd_bind_process_to_device of the peer: -ENODEV without); a peer
 * maps it as the kernel attaches a peer's BO (see the file comment). */
int sim_memory_map(SimProcess *p, struct kfd_ioctl_map_memory_to_gpu_args *a) {
        const uint32_t *ids = (const uint32_t *) (uintptr_t) a->device_ids_array_ptr;
        SimMem *m;
        int r;

        r = map_prologue(p, a->handle, a->device_ids_array_ptr, a->n_devices, a->n_success, &m);
        if (r < 0)
                return r;
        for (uint32_t i = a->n_success; i < a->n_devices; i++) {
                SimPdd *peer = sim_process_pdd(p, ids[i]);
                uint32_t bit;

                if (!peer)
                        return -EINVAL; /* "Getting device by id failed" */
                if (!peer->vm_file)
                        return -ENODEV;
                bit = 1u << peer->gpu->index;
                if (!(m->mapped_on & bit)) {
                        /* amdgpu_vm_bo_map: unaligned or out-of-range VA, or a
                         * conflict with another mapping of that VM -> -EINVAL. */
                        if (m->va % PAGE_SIZE_4K || m->va + m->size - 1 > SIM_GPUVM_LIMIT ||
                            m->va + m->size < m->va)
                                return -EINVAL;
                        if (vm_overlaps(peer, m->va, m->size, m))
                                return -EINVAL;
                        m->mapped_on |= bit;
                }
                a->n_success = i + 1;
        }
        return 0;
}

int sim_memory_unmap(SimProcess *p, struct kfd_ioctl_unmap_memory_from_gpu_args *a) {
        const uint32_t *ids = (const uint32_t *) (uintptr_t) a->device_ids_array_ptr;
        SimMem *m;
        int r;

        r = map_prologue(p, a->handle, a->device_ids_array_ptr, a->n_devices, a->n_success, &m);
        if (r < 0)
                return r;
        for (uint32_t i = a->n_success; i < a->n_devices; i++) {
                SimPdd *peer = sim_process_pdd(p, ids[i]);
                uint32_t bit;

                if (!peer)
                        return -EINVAL;
                bit = 1u << peer->gpu->index;
                /* amdgpu_amdkfd_gpuvm_unmap_memory_from_gpu: "If no VMs were
                 * reserved, it means the BO wasn't actually mapped" -> -EINVAL. */
                if (!(m->mapped_on & bit))
                        return -EINVAL;
                /* amdgpu_amdkfd_gpuvm_unmap_memory_from_gpu: "bo_va->queue_refcount
                 * %d" -> -EBUSY: a queue still uses this mapping in that VM
                 * (kernels >= 6.12). */
                if (m->queue_refcount[peer->gpu->index])
                        return -EBUSY;
                m->mapped_on &= ~bit;
                a->n_success = i + 1;
        }
        return 0;
}

/* kfd_ioctl_get_available_memory: that GPU's VRAM not yet taken. */
int sim_memory_available(SimProcess *p, struct kfd_ioctl_get_available_memory_args *a) {
        SimPdd *pdd = sim_process_pdd(p, a->gpu_id);

        if (!pdd)
                return -EINVAL;
        a->available = pdd->gpu->info.vram_size - pdd->gpu->info.vram_used;
        return 0;
}

/* kfd_ioctl_export_dmabuf: dma_buf_fd(dmabuf, args->flags) uses only O_CLOEXEC of
 * the flags; the dma-buf file itself is always read-write (DRM_RDWR). */
int sim_memory_export_dmabuf(SimProcess *p, struct kfd_ioctl_export_dmabuf_args *a) {
        SimMem *m;
        int fd;

        if (!sim_process_pdd(p, KFD_HANDLE_GPU_ID(a->handle)))
                return -EINVAL;
        m = sim_process_find_mem(p, a->handle);
        if (!m)
                return -EINVAL;
        fd = fcntl(m->bo->memfd, (a->flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 3);
        if (fd < 0)
                return -errno;
        m->bo->exported = true;
        a->dmabuf_fd = (uint32_t) fd;
        return 0;
}

/* What the name of a memfd of a BO of d (BO_NAME_FMT) says of it, for a fd
 * whose BO record is gone: 0, its GPU and its allocation flags, or -EINVAL. */
static int dmabuf_identity(SimDevice *d, int fd, const struct stat *st, SimGpu **ret_gpu, uint32_t *ret_flags) {
        char path[64], link[256], expect[64], tail[16];
        uint32_t flags, gpu_id, tag;
        SimGpu *g;
        int seals;
        ssize_t n;

        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        n = readlink(path, link, sizeof link - 1);
        if (n < 0)
                return -EINVAL;
        link[n] = '\0';
        /* "/memfd:kfd-bo:<gpu_id>:<bo_tag>:<flags> (deleted)" */
        if (sscanf(link, "/memfd:kfd-bo:%8" SCNx32 ":%8" SCNx32 ":", &gpu_id, &tag) != 2 || tag != d->bo_tag)
                return -EINVAL;
        g = sim_device_gpu(d, gpu_id);
        if (!g)
                return -EINVAL;
        snprintf(expect, sizeof expect, "/memfd:kfd-bo:%08" PRIx32 ":%08" PRIx32 ":", gpu_id, d->bo_tag);
        if (strncmp(link, expect, strlen(expect)) != 0 ||
            sscanf(link + strlen(expect), "%8" SCNx32 "%15s", &flags, tail) != 2 || strcmp(tail, "(deleted)") != 0)
                return -EINVAL;
        if (!(flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT)))
                return -EINVAL;
        seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
                return -EINVAL;
        if (st->st_size <= 0 || st->st_size % 4096 != 0)
                return -EINVAL;
        *ret_gpu = g;
        *ret_flags = flags;
        return 0;
}

/*
 * A dma-buf another driver exported (kfd-facts §7.6): a real dma-buf (its
 * file system is DMA_BUF_MAGIC, linux/magic.h), or the simulator's stand-in
 * for one — there is no other exporter on a machine without a GPU — a memfd
 * named "foreign-dmabuf:..." and sealed against shrinking and growing, the
 * way udmabuf wants the memfds it turns into dma-bufs (F_SEAL_SHRINK,
 * drivers/dma-buf/udmabuf.c). Its size in *ret_size.
 */
static int foreign_dmabuf(int fd, const struct stat *st, uint64_t *ret_size) {
        char path[64], link[256];
        struct statfs sfs;
        ssize_t n;
        int seals;

        if (fstatfs(fd, &sfs) < 0)
                return -EBADF;
        if (sfs.f_type != DMA_BUF_MAGIC) {
                snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
                n = readlink(path, link, sizeof link - 1);
                if (n < 0)
                        return -EINVAL;
                link[n] = '\0';
                if (strncmp(link, "/memfd:foreign-dmabuf:", strlen("/memfd:foreign-dmabuf:")) != 0)
                        return -EINVAL;
                seals = fcntl(fd, F_GET_SEALS);
                if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
                        return -EINVAL;
        }
        /* dma_buf_getfile() sets the inode's size to the buffer's. */
        if (st->st_size <= 0 || st->st_size % 4096 != 0)
                return -EINVAL;
        *ret_size = (uint64_t) st->st_size;
        return 0;
}

/* dma_buf_get(): a closed fd -> -EBADF, an fd that is not one of our
 * dma-bufs -> -EINVAL (amdgpu: "Can't handle non-graphics buffers"). The BO
 * of a live handle in *ret; or, for a dma-buf whose BO record went with its
 * last handle, *ret NULL; its GPU, size and flags either way. */
static int lookup_dmabuf(SimDevice *d, int fd, SimBo **ret, SimGpu **ret_gpu, uint64_t *ret_size,
                         uint32_t *ret_flags) {
        struct stat st;
        SimBo *bo;
        int r;

        if (fd < 0 || fstat(fd, &st) < 0)
                return -EBADF;
        bo = find_exporter_by_inode(d, st.st_dev, st.st_ino);
        if (bo) {
                if (!bo->exported || bo->foreign)
                        return -EINVAL;
                *ret = bo;
                *ret_gpu = bo->gpu;
                *ret_size = bo->size;
                *ret_flags = bo->alloc_flags;
                return 0;
        }
        r = dmabuf_identity(d, fd, &st, ret_gpu, ret_flags);
        if (r < 0)
                return r;
        *ret = NULL;
        *ret_size = (uint64_t) st.st_size;
        return 0;
}

/* A BO record for the memfd of a dma-buf whose record is gone. */
static int bo_from_dmabuf(SimDevice *d, SimGpu *gpu, int fd, uint64_t size, uint32_t flags, SimBo **ret) {
        _cleanup_(bo_freep) SimBo *bo = calloc(1, sizeof *bo);
        int r;

        if (!bo)
                return -ENOMEM;
        bo->gpu = gpu;
        bo->n_ref = 1;
        bo->size = size;
        bo->alloc_flags = flags;
        bo->exported = true;
        bo->memfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (bo->memfd < 0)
                return -errno;
        r = bo_attach(d, bo, false);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(bo);
        return 0;
}

/* kfd_ioctl_get_dmabuf_info, amdgpu_amdkfd_get_dmabuf_info. */
int sim_memory_get_dmabuf_info(SimProcess *p, struct kfd_ioctl_get_dmabuf_info_args *a) {
        SimGpu *g;
        uint32_t flags;
        uint64_t size;
        SimBo *bo;
        int r;

        r = lookup_dmabuf(p->device, (int) a->dmabuf_fd, &bo, &g, &size, &flags);
        if (r < 0)
                return r;
        a->size = size;
        a->gpu_id = g->info.gpu_id; /* the exporting device's */
        a->flags = (flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) ? KFD_IOC_ALLOC_MEM_FLAGS_VRAM : KFD_IOC_ALLOC_MEM_FLAGS_GTT;
        if (flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC)
                a->flags |= KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
        a->metadata_size = 0; /* KFD BOs carry no metadata */
        return 0;
}

/*
 * IMPORT_DMABUF of another driver's dma-buf: from KFD 1.15 (Linux 6.8) the
 * kernel imports through DRM (drm_gem_prime_fd_to_handle, "drm/amdkfd: Import
 * DMABufs for interop through DRM"; the minor version bump "Enable managing
 * mappings in compute VMs with GEM_VA ioctl" is of the same series), and
 * amdgpu_gem_prime_import attaches a foreign dma-buf as a GTT BO; before
 * that, amdgpu_amdkfd_gpuvm_import_dmabuf refused it with -EINVAL ("Can't
 * handle non-graphics buffers"). GET_DMABUF_INFO refuses it either way.
 * The BO of an fd imported before, or a new one in *ret.
 */
static int import_foreign(SimDevice *d, SimGpu *g, int fd, SimBo **ret, SimBo **ret_fresh) {
        struct stat st;
        uint64_t size;
        SimBo *bo;
        int r;

        if (d->kfd_minor < 15 || fstat(fd, &st) < 0)
                return -EINVAL;
        bo = find_bo_by_inode(d, st.st_dev, st.st_ino);
        if (bo && bo->foreign && bo->gpu == g) {
                *ret = bo;
                return 0;
        }
        r = foreign_dmabuf(fd, &st, &size);
        if (r < 0)
                return r;
        r = bo_from_dmabuf(d, g, fd, size, KFD_IOC_ALLOC_MEM_FLAGS_GTT, ret_fresh);
        if (r < 0)
                return r;
        (*ret_fresh)->foreign = true;
        *ret = *ret_fresh;
        return 0;
}

/* kfd_ioctl_import_dmabuf, amdgpu_amdkfd_gpuvm_import_dmabuf_fd. */
int sim_memory_import_dmabuf(SimProcess *p, struct kfd_ioctl_import_dmabuf_args *a) {
        SimDevice *d = p->device;
        SimPdd *pdd = sim_process_pdd(p, a->gpu_id);
        SimGpu *g, *bo_gpu;
        uint32_t flags, bo_flags;
        uint64_t size;
        SimBo *bo, *fresh = NULL;
        SimMem *m;
        int r;

        if (!pdd)
                return -EINVAL;
        if (!pdd->vm_file)
                return -ENODEV;
        g = pdd->gpu;
        r = lookup_dmabuf(d, (int) a->dmabuf_fd, &bo, &bo_gpu, &size, &bo_flags);
        if (r == -EINVAL) {
                r = import_foreign(d, g, (int) a->dmabuf_fd, &bo, &fresh);
                if (r < 0)
                        return r;
                bo_gpu = g;
                size = bo->size;
                bo_flags = bo->alloc_flags;
        }
        if (r < 0)
                return r;
        if (bo_gpu != g) {
                /* Another GPU's BO. Before 1.15 amdgpu_amdkfd_gpuvm_import_dmabuf
                 * refused it ("Can't handle buffers from other devices"); from
                 * 1.15 the import goes through DRM, which takes another
                 * device's dma-buf as any foreign one: a BO of this GPU
                 * attached to it (amdgpu_gem_prime_import ->
                 * amdgpu_dma_buf_create_obj, preferred_domains GTT, which
                 * import_obj_create accepts), on the same pages. */
                if (d->kfd_minor < 15) {
                        sim_bo_unref(fresh);
                        return -EINVAL;
                }
                r = bo_from_dmabuf(d, g, (int) a->dmabuf_fd, size, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &fresh);
                if (r < 0)
                        return r;
                fresh->foreign = true;
                bo = fresh;
                bo_flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
        }
        if (a->va_addr + size < a->va_addr || handle_overlaps(pdd, a->va_addr, size)) {
                sim_bo_unref(fresh);
                return -EINVAL;
        }
        if (!bo) {
                r = bo_from_dmabuf(d, g, (int) a->dmabuf_fd, size, bo_flags, &fresh);
                if (r < 0)
                        return r;
                bo = fresh;
        }
        /* Imported BOs are VRAM or GTT, WRITABLE | EXECUTABLE. */
        flags = ((bo_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) ? KFD_IOC_ALLOC_MEM_FLAGS_VRAM
                                                           : KFD_IOC_ALLOC_MEM_FLAGS_GTT) |
                KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
        r = mem_add(pdd, bo, a->va_addr, flags, &m);
        sim_bo_unref(fresh); /* the handle holds it now, or nothing does */
        if (r < 0)
                return r;
        a->handle = KFD_MAKE_HANDLE(g->info.gpu_id, m->idr);
        return 0;
}
