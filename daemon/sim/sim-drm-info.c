/* SPDX-License-Identifier: MIT */
/*
 * What the simulated render node tells about its GPU (sim-drm.h): DRM_IOCTL_VERSION
 * and the AMDGPU_INFO queries libdrm_amdgpu's amdgpu_device_initialize()
 * makes — which ROCr 5.7 and later call on the render node of every GPU
 * agent and fail the agent without (docs/rocm.md "Versions").
 *
 * Sources:
 *  - drm_ioctl.c drm_version() / drm_copy_field(): each string's length is
 *    set to its strlen, and at most the caller's length of it copied (no NUL
 *    added); amdgpu_drv.c: name "amdgpu", desc "AMD GPU", date "20150101",
 *    major 3 (KMS_DRIVER_MAJOR). The minor is reported as Linux 6.1's 49
 *    ("3.49.0 - Add gang submit into CS IOCTL") whatever KFD version the
 *    simulator speaks: libdrm checks the major alone.
 *  - amdgpu_kms.c amdgpu_info_ioctl(): return_pointer NULL or return_size 0
 *    -> -EINVAL; each answer copies min(return_size, the kernel's struct)
 *    bytes; an unknown query -> -EINVAL. ACCEL_WORKING: 1. DEV_INFO: the
 *    fields below, gpu_counter_freq = amdgpu_asic_get_xclk() * 10 in kHz
 *    (nv.c: the 100 MHz reference clock, the rate of the simulator's GPU
 *    clock counter, sim_gpu_clock_counter()); virtual_address_offset =
 *    AMDGPU_VA_RESERVED_SIZE (1 MiB in 6.1), virtual_address_max =
 *    min(vm_size, AMDGPU_GMC_HOLE_START), the high range from
 *    AMDGPU_GMC_HOLE_END, gfx10's 48-bit VM (amdgpu_vm_adjust_size(adev,
 *    256 * 1024, 9, 1, 48) in gmc_v10_0.c). READ_MMR_REG: count > 128 or an
 *    SE/SH index past the GPU's -> -EINVAL; a register outside the ASIC's
 *    allowed list -> -EFAULT (nv.c nv_read_register()). VRAM_GTT: the sizes,
 *    GTT being min(max(3 GiB, VRAM), 3/4 of system memory)
 *    (amdgpu_ttm_init() in 6.1), system memory the simulated CPU node's
 *    16 GiB. VRAM_USAGE, VIS_VRAM_USAGE: the VRAM BOs hold.
 *
 * Where the simulator differs (never kinder in what the daemon relies on):
 *  - of the NV allowed-register list only GB_ADDR_CONFIG (0x263e, what
 *    libdrm reads) is modelled; the other registers are -EFAULT, as an
 *    unlisted one is; its value is composed from the simulated GPU's shape
 *    (16 pipes, 4 shader engines, 4 RBs each), not read from a Navi21;
 *  - the other queries (MEMORY and GTT_USAGE: the simulator keeps no count of
 *    GTT in use; HW_IP_INFO, FW_VERSION, SENSOR, ...) are -EINVAL, as for an
 *    unknown query.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

#include <amdgpu_drm.h>

#include "sim-device.h"
#include "sim-drm.h"
#include "sim-file.h"
#include "sim-gpu.h"
#include "util/macro.h"

#define VA_RESERVED_SIZE (1ULL << 20)            /* AMDGPU_VA_RESERVED_SIZE, 6.1 */
#define GMC_HOLE_START 0x0000800000000000ULL     /* AMDGPU_GMC_HOLE_START */
#define GMC_HOLE_END 0xffff800000000000ULL       /* AMDGPU_GMC_HOLE_END */
#define VM_SIZE (1ULL << 48)                     /* gfx10's VM */
#define XCLK_10KHZ 10000u                        /* nv_get_xclk(): 100 MHz in 10 kHz units */
#define SYSTEM_MEMORY (16ULL << 30)              /* the simulated CPU node's (sim-topology.c) */
#define MMR_GB_ADDR_CONFIG 0x263eu
#define MAX_MMR_COUNT 128u

/* GB_ADDR_CONFIG as gfx10's fields put it: NUM_PIPES log2 [2:0],
 * PIPE_INTERLEAVE_SIZE [5:3], MAX_COMPRESSED_FRAGS [7:6], NUM_PKRS log2
 * [10:8], NUM_SHADER_ENGINES log2 [20:19], NUM_RB_PER_SE log2 [27:26]
 * (gc_10_3_0_sh_mask.h). */
static uint32_t gb_addr_config(const SimGpuInfo *g) {
        uint32_t ses = MAX(g->array_count / MAX(g->simd_arrays_per_engine, 1u), 1u);
        uint32_t log2_ses = 0;

        while ((1u << (log2_ses + 1)) <= ses)
                log2_ses++;
        return 4u | 0u << 3 | 3u << 6 | 4u << 8 | log2_ses << 19 | 2u << 26;
}

static uint64_t gtt_size(const SimGpuInfo *g) {
        return MIN(MAX(3ULL << 30, g->vram_size), SYSTEM_MEMORY / 4 * 3);
}

static void dev_info(const SimGpuInfo *g, struct drm_amdgpu_info_device *i) {
        uint32_t ses = MAX(g->array_count / MAX(g->simd_arrays_per_engine, 1u), 1u);
        uint32_t per_sh = g->cu_per_simd_array, left = g->cu_count;

        *i = (struct drm_amdgpu_info_device) {
                .device_id = g->device_id,
                .chip_rev = 0, /* adev->rev_id, the revision in the ASIC's own register */
                .external_rev = 0x28, /* nv.c: external_rev_id = rev_id + 0x28 (Sienna Cichlid) */
                .pci_rev = g->pci_revision,
                .family = AMDGPU_FAMILY_NV,
                .num_shader_engines = ses,
                .num_shader_arrays_per_engine = g->simd_arrays_per_engine,
                .gpu_counter_freq = XCLK_10KHZ * 10,
                .max_engine_clock = (uint64_t) g->max_engine_clk_fcompute * 1000,
                .max_memory_clock = 1000000, /* 1 GHz in kHz */
                .cu_active_number = g->cu_count,
                .num_rb_pipes = ses * 4,
                .enabled_rb_pipes_mask = (1u << (ses * 4)) - 1,
                .num_hw_gfx_contexts = 8,
                .ids_flags = g->device_id == 0x164E ? AMDGPU_IDS_FLAGS_FUSION : 0,
                .virtual_address_offset = VA_RESERVED_SIZE,
                .virtual_address_max = MIN(VM_SIZE - VA_RESERVED_SIZE, GMC_HOLE_START),
                .virtual_address_alignment = 4096,
                .pte_fragment_size = 2u << 20,
                .gart_page_size = 4096,
                .vram_type = AMDGPU_VRAM_TYPE_GDDR6,
                .vram_bit_width = 256,
                .wave_front_size = g->wave_front_size,
                .num_shader_visible_vgprs = 256,
                .num_cu_per_sh = per_sh,
                .num_tcc_blocks = 16,
                .high_va_offset = GMC_HOLE_END,
                .high_va_max = GMC_HOLE_END | (VM_SIZE - VA_RESERVED_SIZE),
        };
        /* The active CUs, shader array by shader array (cu_bitmap[SE][SH]). */
        for (uint32_t se = 0; se < MIN(ses, 4u); se++)
                for (uint32_t sh = 0; sh < MIN(g->simd_arrays_per_engine, 4u); sh++) {
                        uint32_t n = MIN(per_sh, left);
                        i->cu_bitmap[se][sh] = n >= 32 ? UINT32_MAX : (1u << n) - 1;
                        left -= n;
                }
}

/* drm_copy_field(). */
static int copy_field(char *buf, __kernel_size_t *len, const char *value) {
        size_t n = strlen(value), copy = MIN(n, (size_t) *len);

        *len = n;
        if (copy == 0)
                return 0;
        if (!buf)
                return -EFAULT;
        memcpy(buf, value, copy);
        return 0;
}

int sim_drm_version(struct drm_version *v) {
        int r;

        v->version_major = 3;
        v->version_minor = 49;
        v->version_patchlevel = 0;
        r = copy_field(v->name, &v->name_len, "amdgpu");
        if (r == 0)
                r = copy_field(v->date, &v->date_len, "20150101");
        if (r == 0)
                r = copy_field(v->desc, &v->desc_len, "AMD GPU");
        return r;
}

static int copy_out(const struct drm_amdgpu_info *info, const void *value, size_t size) {
        memcpy((void *) (uintptr_t) info->return_pointer, value, MIN((size_t) info->return_size, size));
        return 0;
}

static int read_mmr(const SimGpuInfo *g, const struct drm_amdgpu_info *info) {
        uint32_t se = info->read_mmr_reg.instance >> AMDGPU_INFO_MMR_SE_INDEX_SHIFT & AMDGPU_INFO_MMR_SE_INDEX_MASK;
        uint32_t sh = info->read_mmr_reg.instance >> AMDGPU_INFO_MMR_SH_INDEX_SHIFT & AMDGPU_INFO_MMR_SH_INDEX_MASK;
        uint32_t n = info->read_mmr_reg.count, regs[MAX_MMR_COUNT];

        /* AMDGPU_GFX_MAX_SE 4, AMDGPU_GFX_MAX_SH_PER_SE 2 (amdgpu_gfx.h). */
        if ((se != AMDGPU_INFO_MMR_SE_INDEX_MASK && se >= 4) || (sh != AMDGPU_INFO_MMR_SH_INDEX_MASK && sh >= 2))
                return -EINVAL;
        if (n > MAX_MMR_COUNT)
                return -EINVAL;
        for (uint32_t i = 0; i < n; i++) {
                if (info->read_mmr_reg.dword_offset + i != MMR_GB_ADDR_CONFIG)
                        return -EFAULT;
                regs[i] = gb_addr_config(g);
        }
        return copy_out(info, regs, (size_t) n * sizeof regs[0]);
}

int sim_drm_info(SimFile *f, struct drm_amdgpu_info *info) {
        const SimGpuInfo *g = &f->gpu->info;
        uint32_t u32;
        uint64_t u64;

        if (!info->return_pointer || !info->return_size)
                return -EINVAL;
        switch (info->query) {
        case AMDGPU_INFO_ACCEL_WORKING:
                u32 = 1;
                return copy_out(info, &u32, sizeof u32);
        case AMDGPU_INFO_DEV_INFO: {
                struct drm_amdgpu_info_device d;
                dev_info(g, &d);
                return copy_out(info, &d, sizeof d);
        }
        case AMDGPU_INFO_READ_MMR_REG:
                return read_mmr(g, info);
        case AMDGPU_INFO_VRAM_GTT: {
                struct drm_amdgpu_info_vram_gtt v = {
                        .vram_size = g->vram_size,
                        .vram_cpu_accessible_size = g->vram_size, /* a resizable BAR */
                        .gtt_size = gtt_size(g),
                };
                return copy_out(info, &v, sizeof v);
        }
        case AMDGPU_INFO_VRAM_USAGE:
        case AMDGPU_INFO_VIS_VRAM_USAGE:
                u64 = g->vram_used;
                return copy_out(info, &u64, sizeof u64);
        default:
                return -EINVAL;
        }
}
