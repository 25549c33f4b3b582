/* SPDX-License-Identifier: MIT */
/*
 * Test harness for the RDNA2 interpreter: loads an AMDHSA code object (.hsaco)
 * with a small ELF64 reader, places its loadable segments, kernel arguments, a
 * dispatch packet and buffers at fixed GPU VAs in an IsaMem (malloc'd regions
 * behind a SimIsaMemory translate callback), and performs what the CP engine
 * will do for a DISPATCH_DIRECT: registers from the kernel descriptor, user
 * SGPRs in descriptor order, LDS and scratch sizing. Owned by the test that
 * creates it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/isa/sim-isa.h"

#define ISA_MEM_MAX_REGIONS 32

/* The flat-address apertures the simulated GPU's process reports
 * (sim-process.h SIM_LDS/SCRATCH_APERTURE_BASE) and the SH_MEM_BASES value
 * isa_launch() programs for them. */
#define ISA_LDS_APERTURE (1ull << 48)
#define ISA_SCRATCH_APERTURE (2ull << 48)
#define ISA_SH_MEM_BASES 0x00010002u

typedef struct IsaRegion {
        uint64_t va;
        uint64_t size;
        uint8_t *host;
} IsaRegion;

typedef struct IsaMem {
        IsaRegion regions[ISA_MEM_MAX_REGIONS];
        unsigned n;
        uint64_t next_va;
        SimIsaMemory mem;
        /* Helpers isa_launch() dispatches with (NULL after isa_mem_init: the
         * caller alone); scratch is then sized for a workgroup per thread. */
        SimIsaPool *pool;
        const int *cancel;      /* SimIsaDispatch.cancel of isa_launch(); NULL after isa_mem_init */
        unsigned priority;      /* SimIsaDispatch.priority of isa_launch(); 0 after isa_mem_init */
        /* When set, words 2 and 3 of the scratch V# isa_launch() passes (else
         * NUM_RECORDS 0xffffffff and SIM_ISA_SCRATCH_RSRC3). */
        bool scratch_rsrc_override;
        uint32_t scratch_rsrc[4];
} IsaMem;

void isa_mem_init(IsaMem *m);
void isa_mem_fini(IsaMem *m);
/* A zeroed region of size bytes at the next free VA (64 KiB aligned, with an
 * unmapped gap after it); returns the VA, the host pointer in *ret_host. */
uint64_t isa_mem_alloc(IsaMem *m, uint64_t size, void **ret_host);
/* Frees the regions made after the first n (what isa_launch() placed, so
 * that a caller may launch many times); their VAs are not reused. */
void isa_mem_release(IsaMem *m, unsigned n);
/* A region at a chosen VA. */
void *isa_mem_map(IsaMem *m, uint64_t va, uint64_t size);

typedef struct IsaKernel {
        uint64_t kd_va, entry_va;
        uint32_t group_segment_size, private_segment_size, kernarg_size;
        uint32_t rsrc1, rsrc2, rsrc3;
        uint16_t code_properties;
} IsaKernel;

/* Loads path into m and finds "<name>.kd"; 0 or a negative errno. */
int isa_kernel_load(IsaMem *m, const char *path, const char *name, IsaKernel *ret);

/* Kernel arguments, packed with natural alignment as clang lays them out. */
typedef struct IsaArgs {
        uint8_t bytes[256];
        size_t size;
} IsaArgs;
void isa_args_u64(IsaArgs *a, uint64_t v);
void isa_args_u32(IsaArgs *a, uint32_t v);
void isa_args_f32(IsaArgs *a, float v);

/* Dispatches grid[] workgroups of wg[] work-items (the packet's grid_size is
 * grid * wg, as for a DISPATCH_DIRECT). Returns sim_isa_dispatch()'s value. */
int isa_launch(IsaMem *m, const IsaKernel *k, const uint32_t grid[3], const uint32_t wg[3], const IsaArgs *args,
               uint64_t budget, SimIsaResult *ret);

/* As isa_launch(), with hardware partial workgroups: the last workgroup of
 * dimension i has partial[i] work-items when partial[i] is non-zero (what
 * COMPUTE_DISPATCH_INITIATOR.PARTIAL_TG_EN launches); the dispatch packet's
 * grid_size is (grid - 1) * wg + partial, as a dispatcher writes it. */
int isa_launch_partial(IsaMem *m, const IsaKernel *k, const uint32_t grid[3], const uint32_t wg[3],
                       const uint32_t partial[3], const IsaArgs *args, uint64_t budget, SimIsaResult *ret);

/* Path of a corpus kernel in the build tree. */
const char *isa_kernel_path(const char *file);

/* How many instruction lines of llvm-objdump-15's disassembly of a corpus
 * kernel contain needle (e.g. "v_pk_fma_f16", "row_xmask:"); -errno if the
 * disassembler cannot run. Tests use it to prove that a kernel still makes
 * clang emit the instruction they are about. */
int isa_objdump_count(const char *file, const char *needle);
