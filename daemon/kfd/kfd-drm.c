/* SPDX-License-Identifier: MIT */
/*
 * The one file that uses libdrm / libdrm_amdgpu: identifies the render node
 * that the KFD topology names (drm_render_minor) on the real device — checks
 * that the DRM driver behind it is amdgpu and reads its marketing name and
 * timestamp counter frequency for the device info. Never used with the
 * simulator, whose render node is not a DRM device.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <xf86drm.h>

#include "kfd/kfd-real.h"
#include "util/macro.h"

static void drm_version_freep(drmVersionPtr *v) {
        if (*v)
                drmFreeVersion(*v);
}

int kfd_drm_identify(int render_fd, KfdDrmInfo *ret) {
        KfdDrmInfo info = {};

        __attribute__((cleanup(drm_version_freep))) drmVersionPtr v = drmGetVersion(render_fd);
        if (!v)
                return errno > 0 ? -errno : -ENODEV;
        if (!v->name || strcmp(v->name, "amdgpu") != 0)
                return -ENODEV;
        snprintf(info.driver, sizeof info.driver, "%s", v->name);
        info.drm_major = v->version_major;
        info.drm_minor = v->version_minor;

        uint32_t major, minor;
        amdgpu_device_handle dev = NULL;
        int r = amdgpu_device_initialize(render_fd, &major, &minor, &dev);
        if (r < 0)
                return r;

        const char *mn = amdgpu_get_marketing_name(dev);
        if (mn)
                snprintf(info.marketing_name, sizeof info.marketing_name, "%s", mn);

        struct amdgpu_gpu_info gi = {};
        if (amdgpu_query_gpu_info(dev, &gi) == 0) {
                info.family_id = gi.family_id;
                info.chip_external_rev = gi.chip_external_rev;
                /* gpu_counter_freq is in kHz (amdgpu_kms.c AMDGPU_INFO_DEV_INFO:
                 * gpu_counter_freq = amdgpu_asic_get_xclk(adev) * 10). */
                info.gpu_counter_hz = (uint64_t) gi.gpu_counter_freq * 1000;
        }
        struct drm_amdgpu_info_vram_gtt vg = {};
        if (amdgpu_query_info(dev, AMDGPU_INFO_VRAM_GTT, sizeof vg, &vg) == 0)
                info.vram_size = vg.vram_size;

        amdgpu_device_deinitialize(dev);
        *ret = info;
        return 0;
}
