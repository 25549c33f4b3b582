/* SPDX-License-Identifier: MIT */
/*
 * <linux/kfd_ioctl.h> from linux-libc-dev includes <drm/drm.h>, which Debian
 * does not install there: the DRM uapi headers come with libdrm-dev under
 * /usr/include/libdrm (already on the include path through the libdrm
 * dependency). This forwarding header makes the kernel's include resolve to
 * libdrm's copy of the same uapi file.
 */
#pragma once
#include <drm.h>
