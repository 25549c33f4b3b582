/* SPDX-License-Identifier: MIT */
/*
 * The memory atomics the simulated GPU's engines perform outside the shader
 * (SDMA ATOMIC, PM4 ATOMIC_MEM): the TC_OP codes both packets carry in their
 * 7-bit ATOMIC/OPERATION field, and the one operation each performs on a
 * host word. Pure over its arguments; the engines translate the address and
 * own the memory.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sim-types.h"

/* TC_OP codes (the TC_OP enum of AMD's gfx9/gfx10 chip headers, as PAL's
 * gfx9_plus_merged enum and ROCm's PM4 headers list it; ROCr's BlitSdma sends
 * SDMA_ATOMIC_ADD64 = 47 = TC_OP_ATOMIC_ADD_RTN_64 with SRC_DATA = -1 to
 * decrement a completion signal, amd_blit_sdma.cpp BuildAtomicDecrementCommand).
 * The returning (_RTN) 32-bit integer ops are 0x07/0x08 and 0x0F..0x19, the
 * 64-bit ones the same plus 0x20; the non-returning forms are the returning
 * ones plus 0x40. Float, cache-maintenance and reserved codes are not memory
 * integer atomics. */
#define SIM_TC_OP_ATOMIC_SWAP_RTN_32 0x07u
#define SIM_TC_OP_ATOMIC_CMPSWAP_RTN_32 0x08u
#define SIM_TC_OP_ATOMIC_ADD_RTN_32 0x0Fu
#define SIM_TC_OP_ATOMIC_DEC_RTN_32 0x19u
#define SIM_TC_OP_ATOMIC_SWAP_RTN_64 0x27u
#define SIM_TC_OP_ATOMIC_CMPSWAP_RTN_64 0x28u
#define SIM_TC_OP_ATOMIC_ADD_RTN_64 0x2Fu
#define SIM_TC_OP_ATOMIC_SUB_RTN_64 0x30u
#define SIM_TC_OP_ATOMIC_DEC_RTN_64 0x39u
#define SIM_TC_OP_NO_RETURN 0x40u

/*
 * sim_tc_atomic_width() - the operand width of an integer memory atomic.
 * @op: the 7-bit TC_OP code.
 *
 * Returns 4 or 8 (bytes), or 0 for a code that is not an integer memory
 * atomic (float ops, cache ops, TC_OP_READ/WRITE, reserved codes).
 */
unsigned sim_tc_atomic_width(unsigned op);

/* Whether @op is a compare-swap (the only op a LOOP/COMMAND 1 retries). */
bool sim_tc_atomic_is_cmpswap(unsigned op);

/*
 * sim_tc_atomic() - perform @op on the word at @host, atomically with respect
 * to the CPU and the other engines.
 * @host: the word, aligned to the op's width (sim_tc_atomic_width()).
 * @src: SRC_DATA (the low 32 bits for a 32-bit op).
 * @cmp: CMP_DATA, for compare-swap.
 *
 * Returns whether the memory changed as the op asked: false only for a
 * compare-swap whose compare failed. INC/DEC follow the TC's wrapping
 * definition (INC: old >= src ? 0 : old + 1; DEC: old == 0 || old > src ?
 * src : old - 1).
 */
bool sim_tc_atomic(unsigned op, void *host, uint64_t src, uint64_t cmp);

/*
 * sim_vm_atomic() - an engine's memory atomic in a process's VM on one GPU: the
 * word at @va is translated as any engine access (sim_vm_access()) and
 * changed on memory, not through the GL2 (the engines' atomics are system
 * scope: ROCr's signals live in host memory and are read by the CPU).
 * @op must be a code sim_tc_atomic_width() accepts and @va aligned to it.
 *
 * Returns 0 when memory changed as asked, 1 when a compare-swap's compare
 * failed, -EFAULT with *ret_fault_va set when @va is outside the VM.
 */
int sim_vm_atomic(SimPdd *vm, unsigned op, uint64_t va, uint64_t src, uint64_t cmp, uint64_t *ret_fault_va);

/* The WAIT_REG_MEM / POLL_REGMEM compare functions (sim_queue_compare()) on 64 bits. */
bool sim_compare64(unsigned func, uint64_t v, uint64_t ref);
