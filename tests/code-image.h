/* SPDX-License-Identifier: MIT */
/*
 * Tests that place an AMDHSA code object themselves (the interpreter's tests,
 * the KFD relay's AQL tests): its PT_LOAD segments laid out as one image, as
 * a loader maps them at a base address, and where its "<name>.kd" kernel
 * descriptor is in that image. Every offset followed is checked against the
 * file size.
 */
#pragma once

#include <stdint.h>

typedef struct CodeImage {
        uint8_t *bytes;   /* malloc'ed, size bytes (segments at their p_vaddr, zeros between) */
        uint64_t size;
        uint64_t kd_off;  /* the kernel descriptor's offset in the image */
} CodeImage;

/* 0, -errno from reading path, -EBADMSG for a malformed file, -ENOENT with no
 * such kernel. code_image_free() after. */
int code_image_read(const char *path, const char *name, CodeImage *ret);
void code_image_free(CodeImage *img);
