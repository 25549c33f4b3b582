/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the RDNA2 interpreter (daemon/sim/isa), which runs client
 * code inside the privileged daemon on the simulated GPU. An input is a
 * 16-byte header that chooses the dispatch (wave size, workgroup and grid
 * sizes, user SGPR count, LDS, scratch, the FLAT apertures, RSRC1/2 bits)
 * followed by the instruction stream, to which one s_endpgm is appended. The
 * code, a data region, the kernel arguments and the scratch backing are
 * separate exact-size heap blocks, so ASan sees any host access the VM
 * translation did not grant.
 *
 * Besides "no crash, no leak, no UB, no hang" it checks the interpreter's
 * promises (sim-isa.h):
 *   - it returns 0 or one of the documented errnos, the same value it stores
 *     in the result, and every failure comes with a printable message;
 *   - it reaches memory only through the VM (translate), never writes
 *     read-only code, and a -EFAULT (but for LDS and a misaligned pc) follows
 *     a translation the VM refused;
 *   - it keeps to the instruction budget;
 *   - it is deterministic: a second run from the same memory ends the same
 *     way (error, pc, counters, message) and leaves the same bytes (checked
 *     for one input in four, chosen by a hash of the input).
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files on its command line (the
 * seed corpus of fuzz-gen-corpus: real instruction sequences, random dwords
 * and mutations of the real ones).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/isa/sim-isa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER_BYTES 16u
#define MAX_CODE_BYTES 4096u
#define BUDGET 8000u /* wave-instructions per dispatch */

#define CODE_VA 0x100000000ull
#define DATA_VA 0x200000000ull
#define DATA_BYTES 65536u
#define SCRATCH_VA 0x300000000ull
#define S_ENDPGM 0xbf810000u

typedef struct Region {
        uint64_t va;
        uint64_t size;
        uint8_t *host;
        bool writable;
} Region;

typedef struct Vm {
        Region r[3]; /* code, data, scratch */
        unsigned denied;
        unsigned code_writes;
} Vm;

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-isa: broken promise: %s\n", what);
                abort();
        }
}

static int translate(void *userdata, uint64_t va, uint64_t len, bool write, void **ret_host) {
        Vm *vm = userdata;

        for (unsigned i = 0; i < 3; i++) {
                Region *r = &vm->r[i];
                if (!r->host || va < r->va || len > r->size || va - r->va > r->size - len)
                        continue;
                if (write && !r->writable) {
                        vm->code_writes++;
                        break;
                }
                *ret_host = r->host + (va - r->va);
                return 0;
        }
        vm->denied++;
        return -EFAULT;
}

static bool errno_documented(int r) {
        switch (r) {
        case 0:
        case -EFAULT:
        case -EILSEQ:
        case -ETIME:
        case -EINVAL:
        case -EDEADLK:
        case -ENOMEM:
                return true;
        default:
                return false;
        }
}

static bool printable(const char *s, size_t max) {
        size_t n = strnlen(s, max);

        if (n == 0 || n == max)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || (unsigned char) s[i] > 0x7e)
                        return false;
        return true;
}

/* The header's choices, each folded into the range the dispatcher would give. */
static void dispatch_from_header(const uint8_t *h, uint32_t code_bytes, SimIsaDispatch *d, uint64_t *scratch_bytes) {
        uint8_t flags = h[0];
        uint32_t wg_threads, wave, per_lane, user_sgprs;

        memset(d, 0, sizeof *d);
        d->entry_va = CODE_VA;
        d->wave32 = !(flags & 0x01);
        d->wg_size[0] = h[1] % 64u + 1;
        d->wg_size[1] = h[2] % 2u + 1;
        d->wg_size[2] = h[3] % 2u + 1;
        d->grid[0] = h[4] % 3u + 1;
        d->grid[1] = h[5] % 2u + 1;
        d->grid[2] = 1;
        if (h[6] & 0x80) /* a partial last workgroup in x */
                d->partial[0] = h[6] % d->wg_size[0] + 1;
        d->wg_id_base[0] = h[6] & 0x40 ? 7 : 0;
        user_sgprs = h[7] % 17u;
        /* Mostly 0..8 granules of 512 bytes (LDS is cleared for every
         * workgroup: a large one costs time, not coverage); from 0x80 on
         * 0..130 of them, where 129 and 130 are over the 64 KiB limit. */
        d->lds_bytes = (h[8] < 0x80 ? h[8] % 9u : h[8] % 131u) * 512u;
        per_lane = (flags & 0x02) ? (uint32_t) h[9] * 4u : 0;

        /* RSRC2: SCRATCH_EN, USER_SGPR_COUNT [5:1], TGID_X/Y/Z_EN [9:7],
         * TG_SIZE_EN [10], TIDIG_COMP_CNT [12:11]. */
        d->rsrc2 = (per_lane ? 1u : 0u) | user_sgprs << 1 | (uint32_t) (flags >> 2 & 0x7) << 7 |
                   (uint32_t) (flags >> 5 & 1) << 10 | (uint32_t) (h[10] % 3u) << 11;
        memcpy(&d->rsrc1, h + 12, 4);
        d->rsrc3 = 0;
        /* The LDS and private apertures of FLAT addresses, as the simulated
         * CP programs them (sim-cp.c, SIM_LDS/SCRATCH_APERTURE_BASE), or none. */
        if (flags & 0x40)
                d->sh_mem_bases = 1u << 16 | 2u;

        /* s[0:3] the scratch V# (sim-isa.h), s[4:5] and s[6:7] pointers into
         * the data region, the rest small numbers. */
        d->user_sgpr[0] = (uint32_t) SCRATCH_VA;
        d->user_sgpr[1] = (uint32_t) (SCRATCH_VA >> 32) | 1u << 31;
        d->user_sgpr[2] = 0xffffffffu;
        d->user_sgpr[3] = 1u << 23 | 2u << 21;
        d->user_sgpr[4] = (uint32_t) DATA_VA;
        d->user_sgpr[5] = (uint32_t) (DATA_VA >> 32);
        d->user_sgpr[6] = (uint32_t) (DATA_VA + DATA_BYTES / 2);
        d->user_sgpr[7] = (uint32_t) (DATA_VA >> 32);
        for (unsigned i = 8; i < 16; i++)
                d->user_sgpr[i] = i * h[11];

        wg_threads = d->wg_size[0] * d->wg_size[1] * d->wg_size[2];
        wave = d->wave32 ? 32 : 64;
        d->scratch_per_lane = per_lane;
        d->scratch_va = per_lane ? SCRATCH_VA : 0;
        *scratch_bytes = per_lane ? (uint64_t) (wg_threads + wave - 1) / wave * wave * per_lane : 0;
        (void) code_bytes;
}

/* The data region's contents: the first 32 qwords are pointers into the
 * data region (so loaded addresses often land somewhere mapped), then a
 * pattern. Built once; each run starts from a copy. */
static uint8_t data_template[DATA_BYTES];
/* The data regions of the two runs: exact-size heap blocks (so ASan sees an
 * access past them), allocated once for the whole fuzzing run. */
static uint8_t *data_host[2];

static void data_setup(void) {
        if (data_host[0])
                return;
        for (uint32_t i = 0; i < DATA_BYTES / 8; i++) {
                uint64_t v = i < 32 ? DATA_VA + i * 256u : 0x3f800000u * (uint64_t) (i & 7) + i;
                memcpy(data_template + i * 8, &v, 8);
        }
        for (unsigned k = 0; k < 2; k++) {
                data_host[k] = malloc(DATA_BYTES);
                check(data_host[k] != NULL, "malloc");
        }
}

static void vm_new(Vm *vm, unsigned k, const uint8_t *code, uint32_t code_bytes, uint64_t scratch_bytes) {
        memset(vm, 0, sizeof *vm);
        vm->r[0] = (Region) { .va = CODE_VA, .size = code_bytes, .host = malloc(code_bytes) };
        vm->r[1] = (Region) { .va = DATA_VA, .size = DATA_BYTES, .host = data_host[k], .writable = true };
        check(vm->r[0].host != NULL, "malloc");
        memcpy(vm->r[0].host, code, code_bytes);
        memcpy(vm->r[1].host, data_template, DATA_BYTES);
        if (scratch_bytes) {
                vm->r[2] = (Region) { .va = SCRATCH_VA, .size = scratch_bytes, .host = calloc(1, scratch_bytes),
                                      .writable = true };
                check(vm->r[2].host, "calloc");
        }
}

static void vm_free(Vm *vm) {
        free(vm->r[0].host);
        free(vm->r[2].host);
}

static void run(const SimIsaDispatch *d, Vm *vm, SimIsaResult *res) {
        SimIsaMemory mem = { .userdata = vm, .translate = translate };
        int r;

        memset(res, 0, sizeof *res);
        r = sim_isa_dispatch(d, &mem, BUDGET, res);
        check(errno_documented(r), "an undocumented errno");
        check(r == res->error, "the return value is not the result's error");
        check(r == 0 || printable(res->message, sizeof res->message), "a failure without a printable message");
        check(vm->code_writes == 0 || r == -EFAULT, "a refused write to code did not end the dispatch as a fault");
        /* A fault outside LDS and not a misaligned pc is the VM's refusal. */
        check(r != -EFAULT || vm->denied > 0 || strstr(res->message, "LDS") || strstr(res->message, "misaligned pc"),
              "-EFAULT without a refused translation");
        /* The budget is checked per slice of instructions: one wave may
         * finish its slice past it, never more. */
        check(res->wave_instructions <= (uint64_t) BUDGET + 256u, "instruction budget overrun");
        check(res->lane_instructions <= res->wave_instructions * 64u, "more lane- than 64 x wave-instructions");
}

/* FNV-1a. */
static uint32_t input_hash(const uint8_t *data, size_t size) {
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < size; i++)
                h = (h ^ data[i]) * 16777619u;
        return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t code[MAX_CODE_BYTES + 4];
        uint32_t code_bytes, endpgm = S_ENDPGM;
        uint64_t scratch_bytes;
        SimIsaResult a, b;
        SimIsaDispatch d;
        Vm va, vb;

        if (size < HEADER_BYTES)
                return 0;
        code_bytes = (uint32_t) ((size - HEADER_BYTES) / 4 * 4);
        if (code_bytes > MAX_CODE_BYTES)
                code_bytes = MAX_CODE_BYTES;
        memcpy(code, data + HEADER_BYTES, code_bytes);
        memcpy(code + code_bytes, &endpgm, 4);
        code_bytes += 4;
        dispatch_from_header(data, code_bytes, &d, &scratch_bytes);

        data_setup();
        vm_new(&va, 0, code, code_bytes, scratch_bytes);
        run(&d, &va, &a);
        check(memcmp(va.r[0].host, code, code_bytes) == 0, "the code changed");
        /* The second run, for determinism, for one input in four (chosen by
         * the input, so that a replay does the same): it doubles the time. */
        if (input_hash(data, size) % 4 != 0) {
                vm_free(&va);
                return 0;
        }
        vm_new(&vb, 1, code, code_bytes, scratch_bytes);
        run(&d, &vb, &b);

        check(a.error == b.error && a.fault_va == b.fault_va && a.fault_pc == b.fault_pc &&
                      a.wave_instructions == b.wave_instructions && a.lane_instructions == b.lane_instructions &&
                      strcmp(a.message, b.message) == 0,
              "two runs from the same state ended differently");
        check(memcmp(va.r[1].host, vb.r[1].host, DATA_BYTES) == 0 &&
                      (!scratch_bytes || memcmp(va.r[2].host, vb.r[2].host, scratch_bytes) == 0),
              "two runs from the same state left different memory");
        vm_free(&va);
        vm_free(&vb);
        return 0;
}
