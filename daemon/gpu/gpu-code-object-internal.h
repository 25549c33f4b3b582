/* SPDX-License-Identifier: MIT */
/*
 * Private to the code object loader, which is three files:
 * gpu-code-object.c (the object, loading, kernel descriptors),
 * gpu-code-object-elf.c (the ELF file: headers, segments, sections, symbols,
 * notes, the image and its relocations) and gpu-code-object-metadata.c (the
 * NT_AMDGPU_METADATA note, a msgpack map: LLVM AMDGPUUsage "Code Object V3
 * Metadata", with the V4 and V5 amendments). The rules are listed at the top
 * of gpu-code-object.c.
 */
#pragma once

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gpu/gpu-internal.h"
#include "gpu/gpu.h"

/* A kernel's name is its descriptor symbol without ".kd"; GpuKernel.name
 * holds at most this many bytes. */
#define GPU_KERNEL_NAME_MAX (sizeof(((GpuKernel *) 0)->name) - 1)
/* Largest kernarg segment the loader accepts: what one kernarg slot of a
 * compute queue holds (gpu-internal.h GPU_KERNARG_MAX, 4032 bytes; the
 * explicit arguments of an OpenCL kernel are at most 1 KiB on ROCm, hidden
 * ones add a few hundred bytes), so that every kernel that loads can be
 * dispatched. */
#define GPU_KERNEL_MAX_KERNARG_SIZE GPU_KERNARG_MAX

/* What the metadata says about one kernel; GpuKernel.name is left empty (the
 * loader takes it from the descriptor symbol). */
typedef struct GpuKernelMetadata {
        GpuKernel kernel;
        char symbol[GPU_KERNEL_NAME_MAX + 4]; /* .symbol: "<name>.kd" */
        uint32_t wavefront_size;              /* .wavefront_size: 32 or 64 */
} GpuKernelMetadata;

typedef struct GpuCodeObjectMetadata {
        uint32_t version[2]; /* amdhsa.version */
        char target[96];     /* amdhsa.target, "" if absent */
        unsigned n_kernels;
        GpuKernelMetadata *kernels; /* amdhsa.kernels, in order */
} GpuCodeObjectMetadata;

/*
 * Decodes the msgpack document of a NT_AMDGPU_METADATA note (desc, size
 * bytes). -EINVAL with a message in err for anything malformed (not msgpack,
 * a missing key, a wrong type, an argument out of range or overlapping
 * another), -E2BIG for more than GPU_CODE_OBJECT_MAX_KERNELS kernels or
 * GPU_KERNEL_MAX_ARGS arguments, -ENOMEM. On success *ret owns kernels
 * (gpu_code_object_metadata_done frees them).
 */
int gpu_code_object_metadata_parse(const void *desc, size_t size, GpuCodeObjectMetadata *ret, char *err,
                                   size_t errlen);
void gpu_code_object_metadata_done(GpuCodeObjectMetadata *m);

/* Shared by the loader and the metadata decoder. */

#define streq(a, b) (strcmp((a), (b)) == 0)

/* Formats the message into err (if any) and returns r. */
int gpu_code_object_error(char *err, size_t errlen, int r, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* s (n bytes, or up to its NUL if n == SIZE_MAX) made safe for a message:
 * printable ASCII kept, other bytes as \xNN, cut at 64 bytes with "...". */
const char *gpu_code_object_escape(const char *s, size_t n, char buf[static 280]);

/* An AMDHSA kernel descriptor (AMDHSAKernelDescriptor.h kernel_descriptor_t). */
#define KD_SIZE 64u

#define FAIL(l, r, ...) gpu_code_object_error((l)->err, (l)->errlen, (r), __VA_ARGS__)

/* A gfx10/gfx11 target: KFD's gfx_target_version, LLVM's
 * EF_AMDGPU_MACH_AMDGCN_* and whether the target has XNACK. */
typedef struct GfxTarget {
        uint32_t version;
        uint8_t mach;
        uint8_t gfx; /* generation: 10 or 11 */
        bool xnack;
        char name[8];
} GfxTarget;

/* The loader's working state. */
typedef struct Segment {
        uint64_t vaddr, memsz, filesz, offset;
        bool exec;
} Segment;

typedef struct KdSym {
        const char *name; /* "<kernel>.kd", in libelf's view of the file */
        uint64_t vaddr;
} KdSym;

typedef struct Loader {
        GpuContext *ctx;            /* where to load; NULL to parse only */
        const GpuDeviceInfo *info;  /* the device it is for */
        char *err;
        size_t errlen;

        uint8_t *file; /* our own copy: aligned, writable for libelf */
        size_t size;
        Elf *elf;
        unsigned version; /* code object version: 4 or 5 */
        const GfxTarget *target;
        size_t shstrndx;

        Segment *loads;
        size_t n_loads;
        uint64_t image_size;

        KdSym *kds;
        unsigned n_kds;
        GpuCodeObjectMetadata md;

        GpuBuffer *code;
        uint8_t *heap_image;        /* parse only: the image, loaded at base 0 */
        uint8_t *image;
        uint64_t base;
} Loader;

/* Checks the whole file (ELF header and target, sections, PT_LOAD segments,
 * kernel descriptor symbols, the metadata note and its match with the
 * symbols) without allocating GPU memory; fills l. */
int gpu_code_object_elf_check(Loader *l);
/* Allocates the code buffer (l->code) — or, parsing only, an image in memory
 * at base 0 — copies the segments and applies the relocations. */
int gpu_code_object_elf_load(Loader *l);
void gpu_code_object_loader_done(Loader *l);
/* The PT_LOAD whose [vaddr, vaddr + len) lies inside its file bytes (or, with
 * whole_mem, inside its memory image), or NULL. */
const Segment *gpu_code_object_segment_of(const Loader *l, uint64_t vaddr, uint64_t len, bool whole_mem);
