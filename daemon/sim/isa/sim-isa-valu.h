/* SPDX-License-Identifier: MIT */
/*
 * Shared by the vector ALU files (sim-isa-valu.c, sim-isa-vopc.c,
 * sim-isa-vfloat.c): the VOP3 view of a VALU instruction, its resolved source
 * operands, and the float helpers whose semantics the RDNA2 ISA defines
 * beyond plain IEEE arithmetic.
 */
#pragma once

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim-isa-internal.h"

/* One source operand, resolved once per instruction: a VGPR (stride 1 over
 * lanes) or a uniform value (stride 0) copied before any write. */
typedef struct Src {
        const uint32_t *lo, *hi;
        unsigned stride;
        unsigned abs, neg;
        uint32_t k[2];
} Src;

typedef enum SrcKind {
        K32,
        K64I,
        K64F,
} SrcKind;

void sim_isa_src_init(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, Src *s, unsigned code, SrcKind kind);

static inline uint32_t U(const Src *s, unsigned l) {
        return s->lo[l * s->stride];
}
static inline uint64_t U64(const Src *s, unsigned l) {
        return s->lo[l * s->stride] | (uint64_t) s->hi[l * s->stride] << 32;
}
static inline float F(const Src *s, unsigned l) {
        uint32_t u = U(s, l);
        if (s->abs)
                u &= 0x7fffffffu;
        if (s->neg)
                u ^= 0x80000000u;
        return u2f(u);
}
static inline double D(const Src *s, unsigned l) {
        uint64_t u = U64(s, l);
        if (s->abs)
                u &= ~(1ull << 63);
        if (s->neg)
                u ^= 1ull << 63;
        return u2d(u);
}

/* The decoded VOP3 view of any VALU instruction. */
typedef struct Vop {
        unsigned op;            /* VOP3 opcode space */
        unsigned src[3];        /* operand codes, 9 bits */
        unsigned nsrc;
        unsigned vdst;          /* VGPR number, or SGPR code for readlane/readfirstlane/VOPC-in-VOP3 */
        unsigned sdst;          /* carry/mask destination SGPR code (VOP3b, VOPC), VCC for VOP2/VOPC */
        unsigned carry_in;      /* SGPR code of a carry-in/mask operand (VCC for VOP2) */
        unsigned abs, neg, clamp, omod;
        unsigned opsel;         /* VOP3 op_sel[3:0]: 16-bit halves of src0-2 and dst, or permlane FI/BC */
        uint64_t exec;          /* lanes to execute: EXEC, narrowed by DPP row/bank masks */
} Vop;

static inline float out_f32(const Vop *v, float x) {
        switch (v->omod) {
        case 1: x *= 2.0f; break;
        case 2: x *= 4.0f; break;
        case 3: x *= 0.5f; break;
        }
        if (v->clamp)
                x = isnan(x) ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f);
        return x;
}

static inline double out_f64(const Vop *v, double x) {
        switch (v->omod) {
        case 1: x *= 2.0; break;
        case 2: x *= 4.0; break;
        case 3: x *= 0.5; break;
        }
        if (v->clamp)
                x = isnan(x) ? 0.0 : fmin(fmax(x, 0.0), 1.0);
        return x;
}


/* sim-isa-f16.c: binary16 helpers (values as their bit patterns) and the
 * 16-bit VALU operations. MODE.FP_DENORM[7:6] decides whether denormal
 * inputs (half_in) and results (half_out) survive. */
typedef enum HalfOp {
        HALF_ADD,
        HALF_MUL,
        HALF_FMA,
        HALF_MIN,
        HALF_MAX,
} HalfOp;
bool half_is_denorm(uint16_t h);
uint16_t half_in(uint16_t h, uint32_t mode);
uint16_t half_out(uint16_t h, uint32_t mode);
uint16_t half_from(double x);           /* round to nearest even */
double half_to(uint16_t h);             /* exact */
uint16_t half_fma(uint16_t a, uint16_t b, uint16_t c);
uint16_t half_clamp(uint16_t h);
/* One operation with MODE's denormal handling of inputs and result (c only for HALF_FMA). */
uint16_t half_arith(HalfOp op, uint16_t a, uint16_t b, uint16_t c, uint32_t mode);
/* A source whose float inline constants are the half-precision values. */
void sim_isa_src_init16(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, Src *s, unsigned code);
int sim_isa_exec_vop16(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, const Vop *v);
bool sim_isa_vop16_has_opsel(unsigned op);

/* sim-isa-lanes.c: DPP operand permutation (narrows v->exec to the lanes
 * written and points src0 at the permuted copy), v_permlane16/x16. */
int sim_isa_dpp_prepare(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, Vop *v);
int sim_isa_exec_permlane(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, const Vop *v);

/* sim-isa-vopc.c: VOPC compares (VOP3 opcodes 0-255), result to SGPR or EXEC. */
int sim_isa_exec_vopc(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, const Vop *v);

/* sim-isa-vfloat.c */
uint32_t vfloat_cvt_u32(double x);
int32_t vfloat_cvt_i32(double x);
int vfloat_exp32(float x);
int vfloat_exp64(double x);
float vfloat_div_scale32(float s0, float s1, float s2, bool *vcc);
double vfloat_div_scale64(double s0, double s1, double s2, bool *vcc);
float vfloat_div_fmas32(float a, float b, float c, bool vcc);
double vfloat_div_fmas64(double a, double b, double c, bool vcc);
double vfloat_div_fixup(double s0, double s1, double s2);
bool vfloat_class(double x, bool is_snan, uint32_t mask);
float vfloat_med3(float a, float b, float c);
double vfloat_rsq(double x, int p);
double vfloat_trig_preop(double s0, uint32_t s1);
