/* SPDX-License-Identifier: MIT */
/*
 * The buffer resource (V#) a MUBUF instruction names in its SRSRC SGPRs,
 * decoded as gfx10.3 hardware reads it, and the two things the hardware does
 * with it per dword: the address (linear or swizzled) and the range check that
 * turns an access into "loads return 0, stores are dropped". Used by
 * sim-isa-mem.c; nothing here is kept beyond one instruction.
 *
 * Layout (gfx10; ROCr runtime/hsa-runtime/core/inc/registers.h
 * SQ_BUF_RSRC_WORD1 and SQ_BUF_RSRC_WORD3_GFX10; Mesa src/amd/common
 * sid.h S_008F04_* / S_008F0C_*):
 *   dword0     BASE_ADDRESS[31:0]
 *   dword1     BASE_ADDRESS_HI [15:0], STRIDE [29:16] (bytes), CACHE_SWIZZLE 30,
 *              SWIZZLE_ENABLE 31
 *   dword2     NUM_RECORDS
 *   dword3     DST_SEL_X/Y/Z/W [2:0] [5:3] [8:6] [11:9], FORMAT [18:12] (the
 *              gfx10 unified format; 0 = INVALID, 20 = 32_UINT, 22 =
 *              32_FLOAT), reserved [20:19], INDEX_STRIDE [22:21] (8, 16, 32,
 *              64 records), ADD_TID_ENABLE 23, RESOURCE_LEVEL 24, reserved
 *              [27:25], OOB_SELECT [29:28], TYPE [31:30] (0 = buffer)
 * gfx10 has no ELEMENT_SIZE field (gone since gfx9, Mesa aco_scratch_rsrc.h);
 * a swizzled element is one dword.
 *
 * Address (RDNA2 ISA §8.1.6 "Buffer Addressing"): index = VGPR index (IDXEN)
 * + lane id (ADD_TID_ENABLE); offset = instruction offset + VGPR offset (OFFEN)
 * + 4 per further dword of a multi-dword access. Linear: base + soffset +
 * index * STRIDE + offset. Swizzled: base + soffset + (index / INDEX_STRIDE *
 * STRIDE + offset / 4 * 4) * INDEX_STRIDE + index % INDEX_STRIDE * 4 +
 * offset % 4.
 *
 * Range check, per dword of a load or store and all or nothing for an atomic
 * (RDNA2 ISA "Range Checking": out-of-range reads return 0, writes do nothing),
 * by OOB_SELECT (Mesa src/amd/common/ac_descriptors.c ac_build_buffer_descriptor,
 * the GFX10 table):
 *   0  out if index >= NUM_RECORDS or offset >= STRIDE (structured: a STRIDE of
 *      0 puts every access out of range, which is what tinygrad's old word 3,
 *      0x00C00000, selects)
 *   1  out if index >= NUM_RECORDS
 *   2  out only if NUM_RECORDS == 0 (ROCr's scratch V#: "no bounds check in
 *      swizzle mode")
 *   3  out if the swizzled (or, unswizzled, the linear) byte offset >=
 *      NUM_RECORDS (raw)
 * The sources do not say whether soffset counts in case 3; this model counts
 * it (the unkind reading). Every driver writes a valid FORMAT and, on gfx10,
 * RESOURCE_LEVEL 1 (ROCr FillBufRsrcWord3_Gfx10, Mesa
 * ac_build_buffer_descriptor "RESOURCE_LEVEL(gfx_level < GFX11)", ACO's
 * scratch V#); what the hardware does for an untyped access through a V# with
 * FORMAT 0 (INVALID), RESOURCE_LEVEL 0 or a TYPE other than buffer is not
 * documented in them, so this model reads it the unkind way: every access is
 * out of range. DST_SEL is not applied: untyped dword accesses ignore it (ACO
 * builds its gfx10 scratch V# with all four set to SEL_0, aco_scratch_rsrc.h,
 * and reads its spills back).
 */
#include "sim-isa-internal.h"

#define VSHARP_FORMAT_INVALID 0u
#define VSHARP_TYPE_BUFFER 0u

void sim_isa_vsharp_decode(const uint32_t d[4], SimIsaVsharp *ret) {
        unsigned format = (d[3] >> 12) & 0x7f, resource_level = (d[3] >> 24) & 1, type = d[3] >> 30;

        *ret = (SimIsaVsharp) {
                .base = d[0] | (uint64_t) (d[1] & 0xffff) << 32,
                .stride = (d[1] >> 16) & 0x3fff,
                .swizzle = (d[1] >> 31) & 1,
                .num_records = d[2],
                .index_stride = 8u << ((d[3] >> 21) & 3),
                .add_tid = (d[3] >> 23) & 1,
                .oob_select = (d[3] >> 28) & 3,
                .usable = format != VSHARP_FORMAT_INVALID && resource_level == 1 && type == VSHARP_TYPE_BUFFER,
        };
}

/* The byte offset from base + soffset of record `index`, byte `offset`. */
static uint64_t buffer_offset(const SimIsaVsharp *v, uint32_t index, uint32_t offset) {
        if (!v->swizzle)
                return (uint64_t) index * v->stride + offset;
        uint64_t index_msb = index / v->index_stride, index_lsb = index % v->index_stride;
        return (index_msb * v->stride + offset / 4 * 4) * v->index_stride + index_lsb * 4 + offset % 4;
}

static bool in_range(const SimIsaVsharp *v, uint32_t index, uint32_t offset, uint64_t soffset_and_offset) {
        if (!v->usable)
                return false;
        switch (v->oob_select) {
        case 0: return index < v->num_records && offset < v->stride;
        case 1: return index < v->num_records;
        case 2: return v->num_records != 0;
        default: return soffset_and_offset < v->num_records;
        }
}

bool sim_isa_vsharp_address(const SimIsaVsharp *v, unsigned lane, uint32_t index, uint32_t offset, uint32_t soffset,
                            uint64_t *ret_va) {
        if (v->add_tid)
                index += lane;
        uint64_t o = soffset + buffer_offset(v, index, offset);
        *ret_va = v->base + o;
        return in_range(v, index, offset, o);
}
