/* SPDX-License-Identifier: MIT */
/*
 * Vector memory: FLAT/GLOBAL (RDNA2 ISA chapter 10 "Flat Memory
 * Instructions"), MUBUF buffer loads, stores and atomics (chapter 8 "Vector
 * Memory Operations": addressed and range-checked by the V# as
 * sim-isa-vsharp.c decodes it), and the LDS
 * instructions DS_* (chapter 11 "Data Share Operations") on the workgroup's
 * LDS. Every access goes through sim_isa_mem(), so an address outside the
 * mapped memory fails the dispatch with -EFAULT and the address. Lanes are
 * processed in order 0..63, which makes atomics of one workgroup on one
 * address deterministic; atomics on global memory are host atomics, as
 * workgroups may run at once on other threads.
 *
 * FLAT addresses (RDNA2 ISA §10.1 "Flat Memory Instructions", "the address
 * is checked against the LDS and private apertures") go to the workgroup's
 * LDS when they fall in the LDS aperture (offset = address - aperture base),
 * to the lane's private memory when in the private aperture, and to global
 * memory otherwise; the apertures are the 4 GiB ranges whose bits 63:48
 * SH_MEM_BASES holds (SHARED_BASE [31:16], PRIVATE_BASE [15:0]), none when
 * that field is 0. A private address o of lane l (and the offset of a
 * SCRATCH instruction) is at FLAT_SCRATCH + (o / 4) * 4 * wave_size + l * 4 +
 * o % 4: the private segment is swizzled in dwords across the lanes of the
 * wave, the layout the private segment buffer V# gives MUBUF accesses
 * (SWIZZLE_ENABLE, element size 4, ADD_TID_ENABLE, INDEX_STRIDE = wave size:
 * sim-isa.h), so that flat, scratch and buffer instructions see one private
 * memory (LLVM mixes them: a __private variable written by buffer_store and
 * read through a generic pointer). FLAT_SCRATCH is the wave's base the kernel
 * prologue writes with s_setreg_b32 HW_REG_FLAT_SCR_LO/HI (flat scratch init
 * SGPRs + private segment wave offset; LLVM SIFrameLowering
 * emitEntryFunctionFlatScratchInit for GFX10). An access that would cross a
 * dword of that layout (a 64-bit atomic, an unaligned dword) is refused.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "sim-isa-internal.h"
#include "sim-isa-opcodes.h"

typedef enum AtomicOp {
        AT_NONE, AT_SWAP, AT_CMPSWAP, AT_ADD, AT_SUB, AT_RSUB, AT_SMIN, AT_UMIN, AT_SMAX, AT_UMAX,
        AT_AND, AT_OR, AT_XOR, AT_INC, AT_DEC,
} AtomicOp;

static uint64_t atomic_apply(AtomicOp a, uint64_t old, uint64_t src, uint64_t cmp, bool is64) {
        uint64_t m = is64 ? ~0ull : 0xffffffffull;
        int64_t so = is64 ? (int64_t) old : (int32_t) old, ss = is64 ? (int64_t) src : (int32_t) src;
        switch (a) {
        case AT_SWAP: return src;
        case AT_CMPSWAP: return old == cmp ? src : old;
        case AT_ADD: return (old + src) & m;
        case AT_SUB: return (old - src) & m;
        case AT_RSUB: return (src - old) & m;
        case AT_SMIN: return so < ss ? old : src;
        case AT_UMIN: return old < src ? old : src;
        case AT_SMAX: return so > ss ? old : src;
        case AT_UMAX: return old > src ? old : src;
        case AT_AND: return old & src;
        case AT_OR: return old | src;
        case AT_XOR: return old ^ src;
        case AT_INC: return old >= src ? 0 : (old + 1) & m;
        case AT_DEC: return (old == 0 || old > src) ? src : old - 1;
        default: return old;
        }
}

/* The atomic read-modify-write of n (4 or 8) bytes at p; returns the old
 * value. Other workgroups may run on other threads (sim-isa-pool.c), and the
 * client's CPU may touch the memory too, so an aligned one is a host
 * compare-and-swap loop. A misaligned one (the hardware requires natural
 * alignment) is made atomic against the other misaligned ones by a lock. */
static uint64_t atomic_rmw(void *p, unsigned n, AtomicOp a, uint64_t src, uint64_t cmp) {
        static pthread_mutex_t misaligned = PTHREAD_MUTEX_INITIALIZER;
        uint64_t old = 0, nv;

        if (n == 4 && ((uintptr_t) p & 3) == 0) {
                uint32_t *q = p, o = __atomic_load_n(q, __ATOMIC_RELAXED);
                while (!__atomic_compare_exchange_n(q, &o, (uint32_t) atomic_apply(a, o, src, cmp, false), false,
                                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
                        ;
                return o;
        }
        if (n == 8 && ((uintptr_t) p & 7) == 0) {
                uint64_t *q = p, o = __atomic_load_n(q, __ATOMIC_RELAXED);
                while (!__atomic_compare_exchange_n(q, &o, atomic_apply(a, o, src, cmp, true), false, __ATOMIC_SEQ_CST,
                                                    __ATOMIC_RELAXED))
                        ;
                return o;
        }
        pthread_mutex_lock(&misaligned);
        memcpy(&old, p, n);
        nv = atomic_apply(a, old, src, cmp, n == 8);
        memcpy(p, &nv, n);
        pthread_mutex_unlock(&misaligned);
        return old;
}

/* A load or store of 1, 2 or 4 bytes of memory other threads may access at
 * the same time (another workgroup, the client's CPU): single-copy atomic
 * when aligned, as the hardware's dword accesses are (a relaxed atomic, a
 * plain move on x86); byte-wise otherwise. */
static uint32_t load_shared(const void *p, unsigned bytes) {
        uint32_t x = 0;

        if (bytes == 4 && ((uintptr_t) p & 3) == 0)
                return __atomic_load_n((const uint32_t *) p, __ATOMIC_RELAXED);
        if (bytes == 2 && ((uintptr_t) p & 1) == 0)
                return __atomic_load_n((const uint16_t *) p, __ATOMIC_RELAXED);
        if (bytes == 1)
                return __atomic_load_n((const uint8_t *) p, __ATOMIC_RELAXED);
        memcpy(&x, p, bytes);
        return x;
}

static void store_shared(void *p, uint32_t x, unsigned bytes) {
        if (bytes == 4 && ((uintptr_t) p & 3) == 0)
                __atomic_store_n((uint32_t *) p, x, __ATOMIC_RELAXED);
        else if (bytes == 2 && ((uintptr_t) p & 1) == 0)
                __atomic_store_n((uint16_t *) p, (uint16_t) x, __ATOMIC_RELAXED);
        else if (bytes == 1)
                __atomic_store_n((uint8_t *) p, (uint8_t) x, __ATOMIC_RELAXED);
        else
                memcpy(p, &x, bytes);
}

/* GLOBAL/FLAT/MUBUF share opcode numbers for loads, stores and atomics. */
typedef struct MemOp {
        unsigned bytes;         /* per dword-slot access: 1, 2 or 4 */
        unsigned dwords;        /* number of dwords moved */
        bool store, sign;
        AtomicOp atomic;
        bool is64;              /* 64-bit atomic */
        /* The _d16 forms (RDNA2 ISA, e.g. GLOBAL_LOAD_SHORT_D16_HI): a load
         * fills the low (D16_LO) or high (D16_HI) half of the VGPR and keeps
         * the other, a byte sign- or zero-extended to 16 bits; a _d16_hi
         * store writes from the high half. */
        enum { D16_NONE, D16_LO, D16_HI } d16;
} MemOp;

/* A loaded 1-, 2- or 4-byte value x merged into the VGPR old as m says. */
static uint32_t load_value(const MemOp *m, unsigned bytes, uint32_t x, uint32_t old) {
        if (m->sign)
                x = bytes == 1 ? (uint32_t) (int32_t) (int8_t) x : (uint32_t) (int32_t) (int16_t) x;
        if (m->d16 == D16_LO)
                return (old & 0xffff0000u) | (x & 0xffff);
        if (m->d16 == D16_HI)
                return (old & 0xffffu) | x << 16;
        return x;
}

static bool memop_from_flat(unsigned op, MemOp *m) {
        memset(m, 0, sizeof(*m));
        m->bytes = 4;
        m->dwords = 1;
        switch (op) {
        case GLOBAL_GLOBAL_LOAD_UBYTE: m->bytes = 1; return true;
        case GLOBAL_GLOBAL_LOAD_SBYTE: m->bytes = 1; m->sign = true; return true;
        case GLOBAL_GLOBAL_LOAD_USHORT: m->bytes = 2; return true;
        case GLOBAL_GLOBAL_LOAD_SSHORT: m->bytes = 2; m->sign = true; return true;
        case GLOBAL_GLOBAL_LOAD_DWORD: return true;
        case GLOBAL_GLOBAL_LOAD_DWORDX2: m->dwords = 2; return true;
        case GLOBAL_GLOBAL_LOAD_DWORDX3: m->dwords = 3; return true;
        case GLOBAL_GLOBAL_LOAD_DWORDX4: m->dwords = 4; return true;
        case GLOBAL_GLOBAL_STORE_BYTE: m->bytes = 1; m->store = true; return true;
        case GLOBAL_GLOBAL_STORE_SHORT: m->bytes = 2; m->store = true; return true;
        case GLOBAL_GLOBAL_STORE_DWORD: m->store = true; return true;
        case GLOBAL_GLOBAL_STORE_DWORDX2: m->dwords = 2; m->store = true; return true;
        case GLOBAL_GLOBAL_STORE_DWORDX3: m->dwords = 3; m->store = true; return true;
        case GLOBAL_GLOBAL_STORE_DWORDX4: m->dwords = 4; m->store = true; return true;
        case GLOBAL_GLOBAL_LOAD_UBYTE_D16: m->bytes = 1; m->d16 = D16_LO; return true;
        case GLOBAL_GLOBAL_LOAD_UBYTE_D16_HI: m->bytes = 1; m->d16 = D16_HI; return true;
        case GLOBAL_GLOBAL_LOAD_SBYTE_D16: m->bytes = 1; m->sign = true; m->d16 = D16_LO; return true;
        case GLOBAL_GLOBAL_LOAD_SBYTE_D16_HI: m->bytes = 1; m->sign = true; m->d16 = D16_HI; return true;
        case GLOBAL_GLOBAL_LOAD_SHORT_D16: m->bytes = 2; m->d16 = D16_LO; return true;
        case GLOBAL_GLOBAL_LOAD_SHORT_D16_HI: m->bytes = 2; m->d16 = D16_HI; return true;
        case GLOBAL_GLOBAL_STORE_BYTE_D16_HI: m->bytes = 1; m->store = true; m->d16 = D16_HI; return true;
        case GLOBAL_GLOBAL_STORE_SHORT_D16_HI: m->bytes = 2; m->store = true; m->d16 = D16_HI; return true;
        }
        static const AtomicOp at[] = {
                [GLOBAL_GLOBAL_ATOMIC_SWAP - 48] = AT_SWAP, [GLOBAL_GLOBAL_ATOMIC_CMPSWAP - 48] = AT_CMPSWAP,
                [GLOBAL_GLOBAL_ATOMIC_ADD - 48] = AT_ADD, [GLOBAL_GLOBAL_ATOMIC_SUB - 48] = AT_SUB,
                [GLOBAL_GLOBAL_ATOMIC_SMIN - 48] = AT_SMIN, [GLOBAL_GLOBAL_ATOMIC_UMIN - 48] = AT_UMIN,
                [GLOBAL_GLOBAL_ATOMIC_SMAX - 48] = AT_SMAX, [GLOBAL_GLOBAL_ATOMIC_UMAX - 48] = AT_UMAX,
                [GLOBAL_GLOBAL_ATOMIC_AND - 48] = AT_AND, [GLOBAL_GLOBAL_ATOMIC_OR - 48] = AT_OR,
                [GLOBAL_GLOBAL_ATOMIC_XOR - 48] = AT_XOR, [GLOBAL_GLOBAL_ATOMIC_INC - 48] = AT_INC,
                [GLOBAL_GLOBAL_ATOMIC_DEC - 48] = AT_DEC,
        };
        if (op >= 48 && op < 48 + ELEMS(at) && at[op - 48]) {
                m->atomic = at[op - 48];
                return true;
        }
        if (op >= 80 && op < 80 + ELEMS(at) && at[op - 80]) {
                m->atomic = at[op - 80];
                m->is64 = true;
                m->dwords = 2;
                return true;
        }
        return false;
}

/* One lane's access at va: loads into v[vdst..], stores from v[vdata..],
 * atomics with v[vdata..] as source (and compare), returning the old value to
 * v[vdst..] when glc is set. addr_of maps the k-th dword offset to its
 * address so swizzled buffers can place each dword separately, and returns
 * false when a buffer's range check puts that dword out of range (a load of
 * it gives 0, a store of it does nothing; an atomic is in or out as a whole);
 * mem_of turns an address into host memory (a flat address or a private
 * offset; NULL for a global VA, the common case, called directly). */
typedef bool (*AddrFn)(const void *ctx, unsigned lane, uint32_t byte_offset, uint64_t *ret_addr);
typedef int (*MemFn)(SimIsaRun *r, SimIsaWave *w, unsigned lane, uint64_t addr, unsigned len, bool write, void **ret);

static int lds_ptr(SimIsaRun *r, SimIsaWave *w, uint32_t addr, unsigned len, void **ret);

/* Lane's private byte o, swizzled (see the file comment). */
static int private_mem(SimIsaRun *r, SimIsaWave *w, unsigned lane, uint64_t o, unsigned len, bool write, void **ret) {
        uint64_t base = w->flat_scratch_lo | (uint64_t) w->flat_scratch_hi << 32;
        o &= 0xffffffffu;
        if ((o & 3) + len > 4)
                return sim_isa_fail(r, -EILSEQ, w->pc,
                                    "private access of %u bytes at 0x%llx crosses a dword of the swizzled private "
                                    "segment at pc 0x%llx", len, (unsigned long long) o, (unsigned long long) w->pc);
        return sim_isa_mem(r, w, base + (o / 4) * 4 * w->lanes + lane * 4 + (o & 3), len, write, ret);
}

static int flat_mem(SimIsaRun *r, SimIsaWave *w, unsigned lane, uint64_t a, unsigned len, bool write, void **ret) {
        if (r->lds_aperture && a - r->lds_aperture <= 0xffffffffu)
                return lds_ptr(r, w, (uint32_t) (a - r->lds_aperture), len, ret);
        if (r->private_aperture && a - r->private_aperture <= 0xffffffffu)
                return private_mem(r, w, lane, a - r->private_aperture, len, write, ret);
        return sim_isa_mem(r, w, a, len, write, ret);
}

/* Whether a lane's access at va is to global memory (not the LDS or the
 * private aperture of a flat address; mem_of NULL: a global VA). */
static bool global_va(const SimIsaRun *r, MemFn mem_of, uint64_t va) {
        if (mem_of == NULL)
                return true;
        if (mem_of != flat_mem)
                return false;
        return !(r->lds_aperture && va - r->lds_aperture <= 0xffffffffu) &&
               !(r->private_aperture && va - r->private_aperture <= 0xffffffffu);
}

/* cached: a FLAT/GLOBAL instruction, whose global loads read through the
 * vector caches (sim-isa-vcache.c) when the memory has them; glc/dlc its bits. */
static int lane_access(SimIsaRun *r, SimIsaWave *w, const MemOp *m, unsigned lane, AddrFn addr_of,
                       const void *ctx, MemFn mem_of, unsigned vdst, unsigned vdata, bool glc, bool cached, bool dlc) {
        void *p;
        int k;

        if (m->atomic) {
                unsigned n = m->is64 ? 8 : 4;
                uint64_t va, va_hi, old = 0, src, cmp = 0;
                bool in = addr_of(ctx, lane, 0, &va) && (!m->is64 || addr_of(ctx, lane, 4, &va_hi));
                if (!in) {
                        if (glc) {
                                w->v[vdst][lane] = 0;
                                if (m->is64)
                                        w->v[(vdst + 1) & 255][lane] = 0;
                        }
                        return 0;
                }
                k = mem_of ? mem_of(r, w, lane, va, n, true, &p) : sim_isa_mem(r, w, va, n, true, &p);
                if (k < 0)
                        return k;
                if (m->is64) {
                        src = w->v[vdata][lane] | (uint64_t) w->v[(vdata + 1) & 255][lane] << 32;
                        if (m->atomic == AT_CMPSWAP)
                                cmp = w->v[(vdata + 2) & 255][lane] | (uint64_t) w->v[(vdata + 3) & 255][lane] << 32;
                } else {
                        src = w->v[vdata][lane];
                        if (m->atomic == AT_CMPSWAP)
                                cmp = w->v[(vdata + 1) & 255][lane];
                }
                old = atomic_rmw(p, n, m->atomic, src, cmp);
                if (r->mem->vcache && global_va(r, mem_of, va))
                        sim_isa_vcache_wrote(r, va, n);
                if (glc) {
                        w->v[vdst][lane] = (uint32_t) old;
                        if (m->is64)
                                w->v[(vdst + 1) & 255][lane] = (uint32_t) (old >> 32);
                }
                return 0;
        }
        /* All addresses first: a load may overwrite its own address VGPRs. */
        uint64_t vas[4];
        bool in[4];
        for (unsigned i = 0; i < m->dwords; i++)
                in[i] = addr_of(ctx, lane, 4 * i, &vas[i]);
        for (unsigned i = 0; i < m->dwords; i++) {
                uint64_t va = vas[i];
                if (!in[i]) {
                        if (!m->store) {
                                uint32_t *d = &w->v[(vdst + i) & 255][lane];
                                *d = load_value(m, m->bytes, 0, *d);
                        }
                        continue;
                }
                bool vcache = r->mem->vcache && global_va(r, mem_of, va);
                if (vcache && cached && !m->store) {
                        uint32_t x = 0, *d = &w->v[(vdst + i) & 255][lane];
                        k = sim_isa_vcache_load(r, w, va, m->bytes, glc, dlc, &x);
                        if (k < 0)
                                return k;
                        *d = load_value(m, m->bytes, load_shared(&x, m->bytes), *d);
                        continue;
                }
                k = mem_of ? mem_of(r, w, lane, va, m->bytes, m->store, &p) : sim_isa_mem(r, w, va, m->bytes, m->store, &p);
                if (k < 0)
                        return k;
                if (m->store) {
                        store_shared(p, w->v[(vdata + i) & 255][lane] >> (m->d16 == D16_HI ? 16 : 0), m->bytes);
                        if (vcache)
                                sim_isa_vcache_wrote(r, va, m->bytes);
                } else {
                        uint32_t *d = &w->v[(vdst + i) & 255][lane];
                        *d = load_value(m, m->bytes, load_shared(p, m->bytes), *d);
                }
        }
        return 0;
}

typedef struct FlatCtx {
        const SimIsaWave *w;
        unsigned vaddr;
        bool saddr_valid, scratch, no_vaddr;
        uint64_t saddr;
        int32_t offset;
} FlatCtx;

/* FLAT/GLOBAL: a 64-bit VGPR address, or a 64-bit SGPR base plus a 32-bit
 * VGPR offset. SCRATCH: a 32-bit private offset from an SGPR, a VGPR
 * (SADDR 0x7d, null) or neither (SADDR 0x7f: the instruction offset alone),
 * as llvm-mc-15 -mcpu=gfx1030 encodes "scratch_store_dword off, v0, off". */
static bool flat_addr(const void *c, unsigned lane, uint32_t byte_offset, uint64_t *ret_addr) {
        const FlatCtx *f = c;
        uint64_t a;
        if (f->scratch)
                a = f->saddr_valid ? f->saddr : f->no_vaddr ? 0 : f->w->v[f->vaddr][lane];
        else if (f->saddr_valid)
                a = f->saddr + f->w->v[f->vaddr][lane];
        else
                a = f->w->v[f->vaddr][lane] | (uint64_t) f->w->v[(f->vaddr + 1) & 255][lane] << 32;
        *ret_addr = a + (int64_t) f->offset + byte_offset;
        return true;
}

/* GLOBAL dword loads and stores (no atomics, sub-dword sizes or d16): most of
 * a kernel's memory traffic, so lane_access() and flat_addr() are inlined and
 * specialised here (about 1.2 times the speed of bench-isa's vector add). The
 * result is the same, dword by dword: all addresses of a lane are read before
 * its loads write, each dword is translated (and may fault) on its own, in
 * lane order, so a fault leaves the earlier dwords written. */
static int global_dwords(SimIsaRun *r, SimIsaWave *w, const MemOp *m, const FlatCtx *f, uint64_t exec, unsigned vdst,
                         unsigned vdata, bool glc, bool dlc) {
        unsigned a = f->vaddr;
        bool vcache = r->mem->vcache;

        LANES {
                uint64_t va = f->saddr_valid ? f->saddr + w->v[a][l]
                                             : w->v[a][l] | (uint64_t) w->v[(a + 1) & 255][l] << 32;
                va += (int64_t) f->offset;
                for (unsigned i = 0; i < m->dwords; i++) {
                        void *p;
                        int k;

                        if (vcache && !m->store) {
                                uint32_t x;
                                k = sim_isa_vcache_load(r, w, va + 4 * i, 4, glc, dlc, &x);
                                if (k < 0)
                                        return k;
                                w->v[(vdst + i) & 255][l] = x;
                                continue;
                        }
                        k = sim_isa_mem(r, w, va + 4 * i, 4, m->store, &p);
                        if (k < 0)
                                return k;
                        if (m->store) {
                                store_shared(p, w->v[(vdata + i) & 255][l], 4);
                                if (vcache)
                                        sim_isa_vcache_wrote(r, va + 4 * i, 4);
                        } else
                                w->v[(vdst + i) & 255][l] = load_shared(p, 4);
                }
        }
        return 0;
}

/* FLAT/GLOBAL/SCRATCH: offset[11:0] (signed on gfx10), dlc 12, lds 13,
 * seg[15:14], glc 16, slc 17, op[24:18]; dword 1: addr[7:0], data[15:8],
 * saddr[22:16] (0x7d/0x7f = off), vdst[31:24]. */
static int exec_flat(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        MemOp m;
        FlatCtx f = { .w = w, .scratch = in->enc == ENC_SCRATCH };
        uint64_t exec = wave_exec(w);
        unsigned saddr = (in->w1 >> 16) & 0x7f, vdst = in->w1 >> 24, vdata = (in->w1 >> 8) & 0xff;
        bool glc = (in->w0 >> 16) & 1, dlc = (in->w0 >> 12) & 1;
        MemFn mem_of = in->enc == ENC_FLAT ? flat_mem : in->enc == ENC_SCRATCH ? private_mem : NULL;

        if (!memop_from_flat(in->op, &m) || ((in->w0 >> 13) & 1) || (f.scratch && m.atomic))
                return sim_isa_unsupported(r, w, in);
        f.vaddr = in->w1 & 0xff;
        f.offset = (int32_t) (in->w0 << 20) >> 20;
        if (in->enc == ENC_GLOBAL && saddr != 0x7d && saddr != 0x7f) {
                f.saddr_valid = true;
                f.saddr = w->s[saddr] | (uint64_t) w->s[saddr + 1] << 32;
        } else if (f.scratch && saddr != 0x7d && saddr != 0x7f) {
                f.saddr_valid = true;
                f.saddr = w->s[saddr];
        } else if (f.scratch) {
                f.no_vaddr = saddr == 0x7f;
        }
        if (in->enc == ENC_GLOBAL && !m.atomic && m.bytes == 4 && !m.d16)
                return global_dwords(r, w, &m, &f, exec, vdst, vdata, glc, dlc);
        LANES {
                int k = lane_access(r, w, &m, l, flat_addr, &f, mem_of, vdst, vdata, glc, !f.scratch, dlc);
                if (k < 0)
                        return k;
        }
        return 0;
}

typedef struct BufCtx {
        const SimIsaWave *w;
        SimIsaVsharp v;
        uint32_t soffset, inst_offset;
        bool idxen, offen;
        unsigned vaddr;
} BufCtx;

/* The index and offset of a MUBUF access from its VGPRs (IDXEN: index in
 * the first, OFFEN: offset in the next), placed and range-checked by the V#
 * (sim-isa-vsharp.c). */
static bool buf_addr(const void *c, unsigned lane, uint32_t byte_offset, uint64_t *ret_addr) {
        const BufCtx *b = c;
        uint32_t index = 0, offset = b->inst_offset + byte_offset;
        unsigned v = b->vaddr;

        if (b->idxen)
                index = b->w->v[v++ & 255][lane];
        if (b->offen)
                offset += b->w->v[v & 255][lane];
        return sim_isa_vsharp_address(&b->v, lane, index, offset, b->soffset, ret_addr);
}

/* MUBUF: offset[11:0], offen 12, idxen 13, glc 14, dlc 15, lds 16, op[25:18];
 * dword 1: vaddr[7:0], vdata[15:8], srsrc[20:16] (x4), slc 22, tfe 23,
 * soffset[31:24]. */
static int exec_mubuf(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        MemOp m;
        BufCtx b = { .w = w };
        uint64_t exec = wave_exec(w);
        unsigned srsrc = ((in->w1 >> 16) & 0x1f) * 4, vdata = (in->w1 >> 8) & 0xff;
        bool glc = (in->w0 >> 14) & 1;

        if (in->op == MUBUF_BUFFER_GL0_INV || in->op == MUBUF_BUFFER_GL1_INV) {
                sim_isa_vcache_invalidate(r, in->op == MUBUF_BUFFER_GL0_INV, in->op == MUBUF_BUFFER_GL1_INV);
                return 0;
        }
        switch (in->op) {
        /* Loads and stores have the GLOBAL numbers; the buffer atomics too. */
        case MUBUF_BUFFER_LOAD_UBYTE: case MUBUF_BUFFER_LOAD_SBYTE: case MUBUF_BUFFER_LOAD_USHORT:
        case MUBUF_BUFFER_LOAD_SSHORT: case MUBUF_BUFFER_LOAD_DWORD: case MUBUF_BUFFER_LOAD_DWORDX2:
        case MUBUF_BUFFER_LOAD_DWORDX3: case MUBUF_BUFFER_LOAD_DWORDX4: case MUBUF_BUFFER_STORE_BYTE:
        case MUBUF_BUFFER_STORE_SHORT: case MUBUF_BUFFER_STORE_DWORD: case MUBUF_BUFFER_STORE_DWORDX2:
        case MUBUF_BUFFER_STORE_DWORDX3: case MUBUF_BUFFER_STORE_DWORDX4:
        case MUBUF_BUFFER_LOAD_UBYTE_D16: case MUBUF_BUFFER_LOAD_UBYTE_D16_HI: case MUBUF_BUFFER_LOAD_SBYTE_D16:
        case MUBUF_BUFFER_LOAD_SBYTE_D16_HI: case MUBUF_BUFFER_LOAD_SHORT_D16: case MUBUF_BUFFER_LOAD_SHORT_D16_HI:
        case MUBUF_BUFFER_STORE_BYTE_D16_HI: case MUBUF_BUFFER_STORE_SHORT_D16_HI:
        case MUBUF_BUFFER_ATOMIC_SWAP: case MUBUF_BUFFER_ATOMIC_CMPSWAP: case MUBUF_BUFFER_ATOMIC_ADD:
        case MUBUF_BUFFER_ATOMIC_SUB: case MUBUF_BUFFER_ATOMIC_SMIN: case MUBUF_BUFFER_ATOMIC_UMIN:
        case MUBUF_BUFFER_ATOMIC_SMAX: case MUBUF_BUFFER_ATOMIC_UMAX: case MUBUF_BUFFER_ATOMIC_AND:
        case MUBUF_BUFFER_ATOMIC_OR: case MUBUF_BUFFER_ATOMIC_XOR: case MUBUF_BUFFER_ATOMIC_INC:
        case MUBUF_BUFFER_ATOMIC_DEC:
                break;
        default:
                return sim_isa_unsupported(r, w, in);
        }
        if (!memop_from_flat(in->op, &m) || ((in->w0 >> 16) & 1) || ((in->w1 >> 23) & 1))
                return sim_isa_unsupported(r, w, in);
        sim_isa_vsharp_decode(&w->s[srsrc], &b.v);
        b.soffset = sim_isa_sread(r, w, in, in->w1 >> 24);
        b.inst_offset = in->w0 & 0xfff;
        b.offen = (in->w0 >> 12) & 1;
        b.idxen = (in->w0 >> 13) & 1;
        b.vaddr = in->w1 & 0xff;
        LANES {
                /* MUBUF (the scratch path) reads around the vector caches. */
                int k = lane_access(r, w, &m, l, buf_addr, &b, NULL, vdata, vdata, glc, false, false);
                if (k < 0)
                        return k;
        }
        return 0;
}

int sim_isa_exec_vmem(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        switch (in->enc) {
        case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: return exec_flat(r, w, in);
        case ENC_MUBUF: return exec_mubuf(r, w, in);
        default: return sim_isa_unsupported(r, w, in);
        }
}

/* LDS access for one lane; -EFAULT with the LDS byte address when outside the
 * workgroup's allocation (the hardware would discard it; a model that faults
 * finds the bug). */
static int lds_ptr(SimIsaRun *r, SimIsaWave *w, uint32_t addr, unsigned len, void **ret) {
        if ((uint64_t) addr + len > r->lds_size)
                return sim_isa_fail(r, -EFAULT, w->pc, "LDS access of %u bytes at 0x%x outside the %u bytes of LDS at pc 0x%llx",
                                    len, addr, r->lds_size, (unsigned long long) w->pc);
        *ret = r->lds + addr;
        return 0;
}

/* The non-atomic DS loads and stores: ndw dwords (or one byte or short) at
 * vaddr + offset, or, for the _2 forms, at vaddr + off0 * stride and vaddr +
 * off1 * stride. */
typedef struct DsMove {
        unsigned vaddr, data0, data1, vdst, off0, off1, stride, ndw;
        uint32_t offset;
        bool store, two;
} DsMove;

/* Always inlined, so that the call with size 4 and a constant ld compiles to
 * fixed-size copies. */
static inline __attribute__((always_inline)) int ds_move(SimIsaRun *r, SimIsaWave *w, uint64_t exec, const DsMove *m,
                                                         unsigned size, const MemOp *ld) {
        LANES {
                uint32_t base = w->v[m->vaddr][l];
                for (unsigned half = 0; half < (m->two ? 2u : 1u); half++) {
                        uint32_t a = m->two ? base + (half ? m->off1 : m->off0) * m->stride : base + m->offset;
                        unsigned src = half ? m->data1 : m->data0, dst = m->vdst + half * m->ndw;
                        for (unsigned i = 0; i < m->ndw; i++) {
                                void *p = NULL;
                                int k = lds_ptr(r, w, a + 4 * i, size, &p);
                                if (k < 0)
                                        return k;
                                if (m->store) {
                                        uint32_t x = w->v[(src + i) & 255][l] >> (ld->d16 == D16_HI ? 16 : 0);
                                        memcpy(p, &x, size);
                                } else {
                                        uint32_t x = 0, *d = &w->v[(dst + i) & 255][l];
                                        memcpy(&x, p, size);
                                        *d = load_value(ld, size, x, *d);
                                }
                        }
                }
        }
        return 0;
}

/* DS: offset0[7:0], offset1[15:8], gds 17, op[25:18]; dword 1: addr[7:0],
 * data0[15:8], data1[23:16], vdst[31:24]. M0 does not bound LDS on gfx10. */
int sim_isa_exec_ds(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        uint64_t exec = wave_exec(w);
        unsigned off0 = in->w0 & 0xff, off1 = (in->w0 >> 8) & 0xff, op = in->op;
        uint32_t offset = off0 | off1 << 8;
        unsigned vaddr = in->w1 & 0xff, data0 = (in->w1 >> 8) & 0xff, data1 = (in->w1 >> 16) & 0xff,
                 vdst = in->w1 >> 24;
        AtomicOp at = AT_NONE;
        bool rtn = false, is64 = false;
        void *p = NULL;
        int k;

        if ((in->w0 >> 17) & 1)
                return sim_isa_unsupported(r, w, in);   /* GDS */

        switch (op) {
        case DS_DS_PERMUTE_B32: case DS_DS_BPERMUTE_B32: return sim_isa_exec_ds_permute(r, w, in);
        case DS_DS_SWIZZLE_B32: return sim_isa_exec_ds_swizzle(r, w, in);
        case DS_DS_ADD_U32: case DS_DS_ADD_RTN_U32: at = AT_ADD; break;
        case DS_DS_SUB_U32: case DS_DS_SUB_RTN_U32: at = AT_SUB; break;
        case DS_DS_RSUB_U32: case DS_DS_RSUB_RTN_U32: at = AT_RSUB; break;
        case DS_DS_INC_U32: case DS_DS_INC_RTN_U32: at = AT_INC; break;
        case DS_DS_DEC_U32: case DS_DS_DEC_RTN_U32: at = AT_DEC; break;
        case DS_DS_MIN_I32: case DS_DS_MIN_RTN_I32: at = AT_SMIN; break;
        case DS_DS_MAX_I32: case DS_DS_MAX_RTN_I32: at = AT_SMAX; break;
        case DS_DS_MIN_U32: case DS_DS_MIN_RTN_U32: at = AT_UMIN; break;
        case DS_DS_MAX_U32: case DS_DS_MAX_RTN_U32: at = AT_UMAX; break;
        case DS_DS_AND_B32: case DS_DS_AND_RTN_B32: at = AT_AND; break;
        case DS_DS_OR_B32: case DS_DS_OR_RTN_B32: at = AT_OR; break;
        case DS_DS_XOR_B32: case DS_DS_XOR_RTN_B32: at = AT_XOR; break;
        case DS_DS_WRXCHG_RTN_B32: at = AT_SWAP; break;
        case DS_DS_CMPST_B32: case DS_DS_CMPST_RTN_B32: at = AT_CMPSWAP; break;
        case DS_DS_ADD_U64: case DS_DS_ADD_RTN_U64: at = AT_ADD; is64 = true; break;
        case DS_DS_SUB_U64: case DS_DS_SUB_RTN_U64: at = AT_SUB; is64 = true; break;
        case DS_DS_MIN_U64: case DS_DS_MIN_RTN_U64: at = AT_UMIN; is64 = true; break;
        case DS_DS_MAX_U64: case DS_DS_MAX_RTN_U64: at = AT_UMAX; is64 = true; break;
        case DS_DS_MIN_I64: case DS_DS_MIN_RTN_I64: at = AT_SMIN; is64 = true; break;
        case DS_DS_MAX_I64: case DS_DS_MAX_RTN_I64: at = AT_SMAX; is64 = true; break;
        case DS_DS_AND_B64: case DS_DS_AND_RTN_B64: at = AT_AND; is64 = true; break;
        case DS_DS_OR_B64: case DS_DS_OR_RTN_B64: at = AT_OR; is64 = true; break;
        case DS_DS_XOR_B64: case DS_DS_XOR_RTN_B64: at = AT_XOR; is64 = true; break;
        case DS_DS_WRXCHG_RTN_B64: at = AT_SWAP; is64 = true; break;
        case DS_DS_CMPST_B64: case DS_DS_CMPST_RTN_B64: at = AT_CMPSWAP; is64 = true; break;
        }
        if (at != AT_NONE) {
                rtn = (op >= DS_DS_ADD_RTN_U32 && op <= DS_DS_WRAP_RTN_B32) || op >= DS_DS_ADD_RTN_U64;
                unsigned n = is64 ? 8 : 4;
                LANES {
                        k = lds_ptr(r, w, w->v[vaddr][l] + offset, n, &p);
                        if (k < 0)
                                return k;
                        uint64_t old = 0, src, cmp = 0, nv;
                        memcpy(&old, p, n);
                        src = w->v[data0][l] | (is64 ? (uint64_t) w->v[(data0 + 1) & 255][l] << 32 : 0);
                        /* ds_cmpst: data0 is the compare value, data1 the new one. */
                        if (at == AT_CMPSWAP) {
                                cmp = src;
                                src = w->v[data1][l] | (is64 ? (uint64_t) w->v[(data1 + 1) & 255][l] << 32 : 0);
                        }
                        nv = atomic_apply(at, old, src, cmp, is64);
                        memcpy(p, &nv, n);
                        if (rtn) {
                                w->v[vdst][l] = (uint32_t) old;
                                if (is64)
                                        w->v[(vdst + 1) & 255][l] = (uint32_t) (old >> 32);
                        }
                }
                return 0;
        }

        unsigned size = 0, ndw = 0, stride = 0;
        bool store = false, two = false;
        MemOp ld = { 0 };       /* sign and d16 of a load, d16 of a store */
        switch (op) {
        case DS_DS_WRITE_B8: size = 1; ndw = 1; store = true; break;
        case DS_DS_WRITE_B16: size = 2; ndw = 1; store = true; break;
        case DS_DS_WRITE_B32: size = 4; ndw = 1; store = true; break;
        case DS_DS_WRITE_B64: size = 4; ndw = 2; store = true; break;
        case DS_DS_WRITE_B96: size = 4; ndw = 3; store = true; break;
        case DS_DS_WRITE_B128: size = 4; ndw = 4; store = true; break;
        case DS_DS_WRITE2_B32: size = 4; ndw = 1; store = two = true; stride = 4; break;
        case DS_DS_WRITE2ST64_B32: size = 4; ndw = 1; store = two = true; stride = 256; break;
        case DS_DS_WRITE2_B64: size = 4; ndw = 2; store = two = true; stride = 8; break;
        case DS_DS_WRITE2ST64_B64: size = 4; ndw = 2; store = two = true; stride = 512; break;
        case DS_DS_READ_U8: size = 1; ndw = 1; break;
        case DS_DS_READ_I8: size = 1; ndw = 1; ld.sign = true; break;
        case DS_DS_READ_U16: size = 2; ndw = 1; break;
        case DS_DS_READ_I16: size = 2; ndw = 1; ld.sign = true; break;
        case DS_DS_READ_U8_D16: size = 1; ndw = 1; ld.d16 = D16_LO; break;
        case DS_DS_READ_U8_D16_HI: size = 1; ndw = 1; ld.d16 = D16_HI; break;
        case DS_DS_READ_I8_D16: size = 1; ndw = 1; ld.sign = true; ld.d16 = D16_LO; break;
        case DS_DS_READ_I8_D16_HI: size = 1; ndw = 1; ld.sign = true; ld.d16 = D16_HI; break;
        case DS_DS_READ_U16_D16: size = 2; ndw = 1; ld.d16 = D16_LO; break;
        case DS_DS_READ_U16_D16_HI: size = 2; ndw = 1; ld.d16 = D16_HI; break;
        case DS_DS_WRITE_B8_D16_HI: size = 1; ndw = 1; store = true; ld.d16 = D16_HI; break;
        case DS_DS_WRITE_B16_D16_HI: size = 2; ndw = 1; store = true; ld.d16 = D16_HI; break;
        case DS_DS_READ_B32: size = 4; ndw = 1; break;
        case DS_DS_READ_B64: size = 4; ndw = 2; break;
        case DS_DS_READ_B96: size = 4; ndw = 3; break;
        case DS_DS_READ_B128: size = 4; ndw = 4; break;
        case DS_DS_READ2_B32: size = 4; ndw = 1; two = true; stride = 4; break;
        case DS_DS_READ2ST64_B32: size = 4; ndw = 1; two = true; stride = 256; break;
        case DS_DS_READ2_B64: size = 4; ndw = 2; two = true; stride = 8; break;
        case DS_DS_READ2ST64_B64: size = 4; ndw = 2; two = true; stride = 512; break;
        default:
                return sim_isa_unsupported(r, w, in);
        }
        DsMove mv = { .vaddr = vaddr, .data0 = data0, .data1 = data1, .vdst = vdst, .offset = offset,
                      .off0 = off0, .off1 = off1, .stride = stride, .ndw = ndw, .store = store, .two = two };
        /* Whole dwords (no sign, no d16: ld is all zero), the hot case of LDS
         * tiles: copies of constant size, about 1.6 times the speed of the
         * matrix multiply of bench-isa. */
        if (size == 4 && !ld.sign && ld.d16 == D16_NONE)
                return ds_move(r, w, exec, &mv, 4, &(const MemOp) { 0 });
        return ds_move(r, w, exec, &mv, size, &ld);
}
