/* SPDX-License-Identifier: MIT */
/*
 * Which render-node calls a relayed client's KFD process passes on
 * (context-kfd-render.h).
 *
 * Sources: libdrm amdgpu_device.c amdgpu_device_initialize() — drmGetVersion()
 * (DRM_IOCTL_VERSION, twice), AMDGPU_INFO_ACCEL_WORKING, then
 * amdgpu_gpu_info.c amdgpu_query_gpu_info_init() — DEV_INFO and
 * READ_MMR_REG of GB_ADDR_CONFIG (0x263e), before gfx9 also
 * CC_RB_BACKEND_DISABLE (0x263d), PA_SC_RASTER_CONFIG(_1) (0xa0d4, 0xa0d5),
 * GB_TILE_MODE0..31 (0x2644), GB_MACROTILE_MODE0..15 (0x2664) and
 * MC_ARB_RAMCFG (0x9d8): registers of the chip's configuration, not of its
 * state.
 */
#include <stdint.h>
#include <sys/ioctl.h>

#include <amdgpu_drm.h>

#include "contexts/context-kfd-render.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct RegRange {
        uint32_t first, count;
} RegRange;

static const RegRange config_registers[] = {
        { 0x263d, 2 },  /* CC_RB_BACKEND_DISABLE, GB_ADDR_CONFIG */
        { 0x2644, 32 }, /* GB_TILE_MODE0..31 */
        { 0x2664, 16 }, /* GB_MACROTILE_MODE0..15 */
        { 0x9d8, 1 },   /* MC_ARB_RAMCFG */
        { 0xa0d4, 2 },  /* PA_SC_RASTER_CONFIG, PA_SC_RASTER_CONFIG_1 */
};

static bool config_registers_only(uint32_t first, uint32_t count) {
        for (size_t i = 0; i < ELEMENTSOF(config_registers); i++) {
                const RegRange *g = &config_registers[i];
                if (first >= g->first && count <= g->count && first - g->first <= g->count - count)
                        return true;
        }
        return false;
}

static bool info_allowed(const struct drm_amdgpu_info *a) {
        switch (a->query) {
        case AMDGPU_INFO_ACCEL_WORKING:
        case AMDGPU_INFO_DEV_INFO:
        case AMDGPU_INFO_VRAM_GTT:
        case AMDGPU_INFO_HW_IP_INFO:
        case AMDGPU_INFO_HW_IP_COUNT:
        case AMDGPU_INFO_FW_VERSION:
                return true;
        case AMDGPU_INFO_READ_MMR_REG:
                return config_registers_only(a->read_mmr_reg.dword_offset, a->read_mmr_reg.count);
        default:
                return false;
        }
}

bool kfd_render_call_allowed(unsigned long request, const void *arg) {
        if (request == DRM_IOCTL_VERSION)
                return true;
        if (request != DRM_IOCTL_AMDGPU_INFO)
                return false;
        if (arg && info_allowed(arg))
                return true;
        if (arg)
                log_debug("KFD relay: AMDGPU_INFO query 0x%02x of a relayed process refused (it tells of the GPU's "
                          "use, not of the GPU)",
                          ((const struct drm_amdgpu_info *) arg)->query);
        return false;
}
