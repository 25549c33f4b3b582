/* SPDX-License-Identifier: MIT */
/*
 * What ROCr 5.7 and later do with the render node of each GPU agent
 * (docs/rocm.md "Versions"), run through kfdbroker-run: open /dev/kfd and
 * the render node the KFD topology names, then libdrm_amdgpu's
 * amdgpu_device_initialize() (its node-type check through
 * /sys/dev/char/226:MINOR, DRM_IOCTL_VERSION, AMDGPU_INFO), the marketing
 * name and amdgpu_query_gpu_info(), whose gpu_counter_freq ROCr takes as
 * the agent's timestamp rate. Prints what it found; exits 1 naming the
 * first step that failed.
 * Usage: libdrm-probe [RENDER_MINOR]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <amdgpu.h>
#include <amdgpu_drm.h>

int main(int argc, char *argv[]) {
        unsigned minor = argc > 1 ? (unsigned) strtoul(argv[1], NULL, 10) : 128;
        uint32_t major = 0, drm_minor = 0;
        struct amdgpu_gpu_info gi;
        amdgpu_device_handle dev;
        char path[64];
        int kfd, fd, r;

        kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
        if (kfd < 0) {
                fprintf(stderr, "libdrm-probe: /dev/kfd: %s\n", strerror(errno));
                return 1;
        }
        snprintf(path, sizeof path, "/dev/dri/renderD%u", minor);
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "libdrm-probe: %s: %s\n", path, strerror(errno));
                return 1;
        }
        r = amdgpu_device_initialize(fd, &major, &drm_minor, &dev);
        if (r != 0) {
                fprintf(stderr, "libdrm-probe: amdgpu_device_initialize: %s\n", strerror(-r));
                return 1;
        }
        r = amdgpu_query_gpu_info(dev, &gi);
        if (r != 0) {
                fprintf(stderr, "libdrm-probe: amdgpu_query_gpu_info: %s\n", strerror(-r));
                return 1;
        }
        printf("drm %u.%u\nmarketing name: %s\nfamily: %u\ndevice id: 0x%04x\ncounter frequency: %u kHz\n", major,
               drm_minor, amdgpu_get_marketing_name(dev), gi.family_id, gi.asic_id, gi.gpu_counter_freq);
        amdgpu_device_deinitialize(dev);
        close(fd);
        close(kfd);
        return 0;
}
