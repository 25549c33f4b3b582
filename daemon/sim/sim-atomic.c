/* SPDX-License-Identifier: MIT */
/*
 * The memory atomics of the simulated GPU's engines (see sim-atomic.h). The
 * operation of each TC_OP follows its name in the TC_OP enum; SMIN/UMIN/
 * SMAX/UMAX compare signed/unsigned, INC/DEC wrap at SRC_DATA as the ISA's
 * buffer/flat ATOMIC_INC/DEC do (RDNA2 ISA guide: "tmp = MEM[ADDR];
 * MEM[ADDR] = (tmp >= DATA) ? 0 : tmp + 1" and "(tmp == 0 || tmp > DATA) ?
 * DATA : tmp - 1"). Host words are changed with compare-and-swap so that the
 * CPU's own atomics on the same word (ROCr's signal ops) interleave correctly.
 */
#include <errno.h>

#include "sim-atomic.h"
#include "sim-memory.h"

/* The low 6 bits name the op of either width: 0x07 SWAP, 0x08 CMPSWAP,
 * 0x0F ADD, 0x10 SUB, 0x11 SMIN, 0x12 UMIN, 0x13 SMAX, 0x14 UMAX, 0x15 AND,
 * 0x16 OR, 0x17 XOR, 0x18 INC, 0x19 DEC; bit 5 (0x20) selects 64 bits. */
enum {
        OP_SWAP = 0x07,
        OP_CMPSWAP = 0x08,
        OP_ADD = 0x0F,
        OP_SUB,
        OP_SMIN,
        OP_UMIN,
        OP_SMAX,
        OP_UMAX,
        OP_AND,
        OP_OR,
        OP_XOR,
        OP_INC,
        OP_DEC,
};

static unsigned base_op(unsigned op) {
        return op & 0x1Fu;
}

unsigned sim_tc_atomic_width(unsigned op) {
        unsigned b = base_op(op);

        if (op > 0x7Fu)
                return 0;
        if (b != OP_SWAP && b != OP_CMPSWAP && (b < OP_ADD || b > OP_DEC))
                return 0;
        return op & 0x20u ? 8 : 4;
}

bool sim_tc_atomic_is_cmpswap(unsigned op) {
        return sim_tc_atomic_width(op) && base_op(op) == OP_CMPSWAP;
}

/* The new value for old, or false if a compare-swap leaves memory as it is. */
static bool apply(unsigned b, unsigned width, uint64_t old, uint64_t src, uint64_t cmp, uint64_t *ret) {
        uint64_t mask = width == 8 ? UINT64_MAX : UINT32_MAX;
        int64_t sold = width == 8 ? (int64_t) old : (int64_t) (int32_t) (uint32_t) old;
        int64_t ssrc = width == 8 ? (int64_t) src : (int64_t) (int32_t) (uint32_t) src;

        old &= mask;
        src &= mask;
        switch (b) {
        case OP_SWAP: *ret = src; break;
        case OP_CMPSWAP:
                if (old != (cmp & mask))
                        return false;
                *ret = src;
                break;
        case OP_ADD: *ret = old + src; break;
        case OP_SUB: *ret = old - src; break;
        case OP_SMIN: *ret = (uint64_t) (sold < ssrc ? sold : ssrc); break;
        case OP_UMIN: *ret = old < src ? old : src; break;
        case OP_SMAX: *ret = (uint64_t) (sold > ssrc ? sold : ssrc); break;
        case OP_UMAX: *ret = old > src ? old : src; break;
        case OP_AND: *ret = old & src; break;
        case OP_OR: *ret = old | src; break;
        case OP_XOR: *ret = old ^ src; break;
        case OP_INC: *ret = old >= src ? 0 : old + 1; break;
        case OP_DEC: *ret = old == 0 || old > src ? src : old - 1; break;
        default: return false;
        }
        *ret &= mask;
        return true;
}

bool sim_tc_atomic(unsigned op, void *host, uint64_t src, uint64_t cmp) {
        unsigned width = sim_tc_atomic_width(op), b = base_op(op);
        uint64_t neu;

        if (width == 8) {
                uint64_t *w = host, old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
                do {
                        if (!apply(b, 8, old, src, cmp, &neu))
                                return false;
                } while (!__atomic_compare_exchange_n(w, &old, neu, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
                return true;
        }
        if (width == 4) {
                uint32_t *w = host, old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
                do {
                        if (!apply(b, 4, old, src, cmp, &neu))
                                return false;
                } while (!__atomic_compare_exchange_n(w, &old, (uint32_t) neu, false, __ATOMIC_ACQ_REL,
                                                      __ATOMIC_ACQUIRE));
                return true;
        }
        return false;
}

int sim_vm_atomic(SimPdd *vm, unsigned op, uint64_t va, uint64_t src, uint64_t cmp, uint64_t *ret_fault_va) {
        uint8_t *host;

        if (sim_vm_access_write(vm, va, sim_tc_atomic_width(op), &host, ret_fault_va) < 0)
                return -EFAULT;
        return sim_tc_atomic(op, host, src, cmp) ? 0 : 1;
}

bool sim_compare64(unsigned func, uint64_t v, uint64_t ref) {
        switch (func) {
        case 0: return true;
        case 1: return v < ref;
        case 2: return v <= ref;
        case 3: return v == ref;
        case 4: return v != ref;
        case 5: return v >= ref;
        case 6: return v > ref;
        default: return false;
        }
}
