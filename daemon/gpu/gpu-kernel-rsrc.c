/* SPDX-License-Identifier: MIT */
/*
 * Which bits of a kernel descriptor's COMPUTE_PGM_RSRC1/2/3 a client may set:
 * the policy every descriptor passes before its words reach the GPU (at load,
 * gpu-code-object.c, and again on the daemon's copy at each dispatch,
 * gpu-dispatch.c). Stateless.
 *
 * The descriptor's RSRC words are written to the COMPUTE_PGM_RSRC1/2/3
 * registers as they are, so a bit there is a bit of the hardware register.
 * Refused, each with its name and position (LLVM AMDGPUUsage, "Kernel
 * Descriptor", tables "compute_pgm_rsrc1 for GFX6-GFX12", "compute_pgm_rsrc2
 * for GFX6-GFX12", "compute_pgm_rsrc3 for GFX10-GFX11", and
 * llvm/Support/AMDHSAKernelDescriptor.h; the same positions as the kernel's
 * gc_10_3_0_sh_mask.h COMPUTE_PGM_RSRC1__PRIV__SHIFT 0x14 and friends):
 *
 *   RSRC1 PRIV (20): "Must be 0": the waves start in privileged (trap
 *         handler) mode. The daemon's own use on gfx11 (tinygrad's CWSR
 *         workaround, kfd-facts §2.4) is added by gpu-dispatch.c after this
 *         check, never taken from a client.
 *   RSRC1 DEBUG_MODE (22), BULKY (24), CDBG_USER (25): "Must be 0"; the CP
 *         fills them in for a debugger or the runtime.
 *   RSRC1 bits 27-28: reserved.
 *   RSRC2 TRAP_PRESENT (6, ENABLE_TRAP_HANDLER): "Must be 0"; the CP sets it
 *         when the runtime installed a trap handler.
 *   RSRC2 EXCP_EN_MSB (13: address watch, 14: memory violation): "Must be
 *         0"; the CP fills them in as the runtime asks.
 *   RSRC2 EXCP_EN (24-30: the IEEE invalid operation, denormal source,
 *         division by zero, overflow, underflow and inexact exceptions, the
 *         integer division by zero one): legal in a descriptor, but each
 *         sends the waves into the trap handler, which the daemon neither
 *         provides to clients nor reports on: refused as policy ("needs a
 *         trap handler"). clang sets them only for the .amdhsa_exception_*
 *         directives.
 *   RSRC2 bit 31: reserved.
 *   RSRC3 on gfx10: all but SHARED_VGPR_COUNT [3:0] reserved. On gfx11:
 *         TRAP_ON_START (10) and TRAP_ON_END (11) "Must be 0" (the CP fills
 *         them in), bits 12-30 reserved; INST_PREF_SIZE [9:4] and IMAGE_OP
 *         (31) allowed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu/gpu-internal.h"

typedef struct RsrcBit {
        unsigned reg;           /* 1, 2 or 3 */
        unsigned first, last;   /* bit range */
        unsigned gfx;           /* 0 = every generation, else only this one */
        const char *name;       /* NULL: reserved */
        const char *why;
} RsrcBit;

#define CLIENTS_MAY_NOT "which clients may not"
#define NEEDS_TRAP_HANDLER "which needs a trap handler, and the daemon gives clients none"

static const RsrcBit refused[] = {
        { 1, 20, 20, 0, "PRIV", CLIENTS_MAY_NOT },
        { 1, 22, 22, 0, "DEBUG_MODE", CLIENTS_MAY_NOT },
        { 1, 24, 24, 0, "BULKY", CLIENTS_MAY_NOT },
        { 1, 25, 25, 0, "CDBG_USER", CLIENTS_MAY_NOT },
        { 1, 27, 28, 0, NULL, NULL },
        { 2, 6, 6, 0, "TRAP_PRESENT", CLIENTS_MAY_NOT },
        { 2, 13, 13, 0, "EXCP_EN_MSB (address watch)", CLIENTS_MAY_NOT },
        { 2, 14, 14, 0, "EXCP_EN_MSB (memory violation)", CLIENTS_MAY_NOT },
        { 2, 24, 24, 0, "EXCP_EN (IEEE invalid operation)", NEEDS_TRAP_HANDLER },
        { 2, 25, 25, 0, "EXCP_EN (denormal source)", NEEDS_TRAP_HANDLER },
        { 2, 26, 26, 0, "EXCP_EN (IEEE division by zero)", NEEDS_TRAP_HANDLER },
        { 2, 27, 27, 0, "EXCP_EN (IEEE overflow)", NEEDS_TRAP_HANDLER },
        { 2, 28, 28, 0, "EXCP_EN (IEEE underflow)", NEEDS_TRAP_HANDLER },
        { 2, 29, 29, 0, "EXCP_EN (IEEE inexact)", NEEDS_TRAP_HANDLER },
        { 2, 30, 30, 0, "EXCP_EN (integer division by zero)", NEEDS_TRAP_HANDLER },
        { 2, 31, 31, 0, NULL, NULL },
        { 3, 4, 31, 10, NULL, NULL },
        { 3, 10, 10, 11, "TRAP_ON_START", CLIENTS_MAY_NOT },
        { 3, 11, 11, 11, "TRAP_ON_END", CLIENTS_MAY_NOT },
        { 3, 12, 30, 11, NULL, NULL },
};

int gpu_kernel_rsrc_check(unsigned gfx, uint32_t rsrc1, uint32_t rsrc2, uint32_t rsrc3, char *err, size_t errlen) {
        const uint32_t words[4] = { 0, rsrc1, rsrc2, rsrc3 };

        for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
                const RsrcBit *b = &refused[i];
                if (b->gfx && b->gfx != gfx)
                        continue;
                for (unsigned bit = b->first; bit <= b->last; bit++) {
                        if (!(words[b->reg] >> bit & 1))
                                continue;
                        if (err && errlen > 0) {
                                if (b->name)
                                        snprintf(err, errlen,
                                                 "kernel descriptor sets COMPUTE_PGM_RSRC%u.%s (bit %u), %s",
                                                 b->reg, b->name, bit, b->why);
                                else
                                        snprintf(err, errlen,
                                                 "kernel descriptor sets bit %u of COMPUTE_PGM_RSRC%u, which is "
                                                 "reserved on gfx%u",
                                                 bit, b->reg, gfx);
                        }
                        return -EINVAL;
                }
        }
        return 0;
}
