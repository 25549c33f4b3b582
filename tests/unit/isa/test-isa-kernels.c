/* SPDX-License-Identifier: MIT */
/*
 * The corpus of OpenCL C kernels (tests/kernels/, compiled by clang-15 for
 * gfx1030 at build time) run on the RDNA2 interpreter and checked element by
 * element against a CPU reference, for several grid shapes: a single item,
 * sizes that leave a partial workgroup and a partial wave, and workgroups
 * that are not a multiple of 32 work-items.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "isa-helper.h"

#define ELEMS_(x) (sizeof(x) / sizeof((x)[0]))

typedef struct Shape {
        uint32_t n, wg;
} Shape;

static const Shape shapes_1d[] = {
        { 1, 64 }, { 100, 32 }, { 1000, 256 }, { 77, 48 }, { 4097, 128 }, { 33, 1 },
};

static uint32_t rng_state;
static uint32_t rnd(void) {
        rng_state = rng_state * 1664525u + 1013904223u;
        return rng_state >> 8;
}

static void load(IsaMem *m, const char *file, const char *name, IsaKernel *k) {
        isa_mem_init(m);
        int r = isa_kernel_load(m, isa_kernel_path(file), name, k);
        cr_assert_eq(r, 0, "loading %s: %s", file, strerror(-r));
}

static void launch_1d(IsaMem *m, const IsaKernel *k, const Shape *s, const IsaArgs *a, SimIsaResult *res) {
        uint32_t grid[3] = { (s->n + s->wg - 1) / s->wg, 1, 1 }, wg[3] = { s->wg, 1, 1 };
        int r = isa_launch(m, k, grid, wg, a, 100000000, res);
        cr_assert_eq(r, 0, "n=%u wg=%u: %s (%s)", s->n, s->wg, strerror(-r), res->message);
        cr_assert_gt(res->lane_instructions, 0);
}

static bool close_f(float a, float b, float rel) {
        if (isnan(a) || isnan(b))
                return isnan(a) && isnan(b);
        if (a == b)
                return true;
        return fabsf(a - b) <= rel * fmaxf(fabsf(a), fabsf(b));
}

Test(isa, vector_add) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                float *x, *y, *z;
                load(&m, "vector-add.hsaco", "vector_add", &k);
                uint64_t xv = isa_mem_alloc(&m, 4 * s->n, (void **) &x), yv = isa_mem_alloc(&m, 4 * s->n, (void **) &y),
                         zv = isa_mem_alloc(&m, 4 * s->n + 4, (void **) &z);
                for (uint32_t i = 0; i < s->n; i++)
                        x[i] = (float) i * 0.5f, y[i] = (float) (rnd() % 1000) - 3.25f;
                z[s->n] = 1234.0f;
                isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, zv), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++)
                        cr_assert_eq(z[i], x[i] + y[i], "n=%u wg=%u i=%u: %f != %f", s->n, s->wg, i, z[i], x[i] + y[i]);
                cr_assert_eq(z[s->n], 1234.0f, "the guard let a work-item past n write");
                isa_mem_fini(&m);
        }
}

Test(isa, saxpy) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                float *x, *y, *ref = malloc(4 * s->n);
                load(&m, "saxpy.hsaco", "saxpy", &k);
                uint64_t xv = isa_mem_alloc(&m, 4 * s->n, (void **) &x), yv = isa_mem_alloc(&m, 4 * s->n, (void **) &y);
                for (uint32_t i = 0; i < s->n; i++) {
                        x[i] = (float) (rnd() % 2000) / 7.0f - 100.0f;
                        y[i] = (float) (rnd() % 2000) / 3.0f;
                        ref[i] = fmaf(2.5f, x[i], y[i]);
                }
                isa_args_f32(&a, 2.5f), isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++)
                        cr_assert_eq(y[i], ref[i], "i=%u: %a != %a", i, y[i], ref[i]);
                free(ref);
                isa_mem_fini(&m);
        }
}

Test(isa, index_2d) {
        static const uint32_t dims[][4] = { /* width, height, wg x, wg y */
                { 1, 1, 8, 8 }, { 37, 19, 16, 4 }, { 64, 64, 8, 8 }, { 100, 3, 32, 2 }, { 5, 70, 1, 48 },
        };
        for (size_t t = 0; t < ELEMS_(dims); t++) {
                uint32_t w = dims[t][0], h = dims[t][1], wx = dims[t][2], wy = dims[t][3];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                int32_t *in, *out;
                load(&m, "index-2d.hsaco", "index_2d", &k);
                uint64_t iv = isa_mem_alloc(&m, 4 * w * h, (void **) &in), ov = isa_mem_alloc(&m, 4 * w * h, (void **) &out);
                for (uint32_t i = 0; i < w * h; i++)
                        in[i] = (int32_t) (rnd() % 100000) - 50000;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, w), isa_args_u32(&a, h);
                uint32_t grid[3] = { (w + wx - 1) / wx, (h + wy - 1) / wy, 1 }, wg[3] = { wx, wy, 1 };
                int r = isa_launch(&m, &k, grid, wg, &a, 100000000, &res);
                cr_assert_eq(r, 0, "%s", res.message);
                for (uint32_t y = 0; y < h; y++)
                        for (uint32_t x = 0; x < w; x++) {
                                int32_t e = (int32_t) (x * 1000 + y) + in[y * w + x] +
                                            (int32_t) ((x % wx) * 7 + (y % wy) * 13 + (x / wx) * 17 + (y / wy) * 19);
                                cr_assert_eq(out[y * w + x], e, "%ux%u wg %ux%u at (%u,%u): %d != %d", w, h, wx, wy, x,
                                             y, out[y * w + x], e);
                        }
                isa_mem_fini(&m);
        }
}

static uint32_t collatz_ref(uint32_t v) {
        uint32_t s = 0;
        while (v > 1 && s < 100000) {
                v = (v & 1) ? 3 * v + 1 : v / 2;
                s++;
        }
        return s;
}

Test(isa, collatz) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint32_t *in, *out;
                load(&m, "collatz.hsaco", "collatz", &k);
                uint64_t iv = isa_mem_alloc(&m, 4 * s->n, (void **) &in), ov = isa_mem_alloc(&m, 4 * s->n, (void **) &out);
                for (uint32_t i = 0; i < s->n; i++)
                        in[i] = i < 3 ? i : rnd() % 100000;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++)
                        cr_assert_eq(out[i], collatz_ref(in[i]), "i=%u in=%u: %u != %u", i, in[i], out[i], collatz_ref(in[i]));
                isa_mem_fini(&m);
        }
}

static int32_t divergent_ref(int32_t v) {
        int32_t r;
        if (v < 0) {
                r = -v * 3;
                if (r > 100)
                        r -= 100;
        } else if ((v & 3) == 1) {
                r = v * v;
        } else {
                switch (v % 5) {
                case 0: r = v + 11; break;
                case 1: r = v ^ 0x55; break;
                case 2: r = v << 3; break;
                default: r = v / 7; break;
                }
        }
        return r;
}

Test(isa, divergent) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                int32_t *in, *out;
                load(&m, "divergent.hsaco", "divergent", &k);
                uint64_t iv = isa_mem_alloc(&m, 4 * s->n, (void **) &in), ov = isa_mem_alloc(&m, 4 * s->n, (void **) &out);
                for (uint32_t i = 0; i < s->n; i++)
                        in[i] = (int32_t) (rnd() % 20000) - 10000;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++)
                        cr_assert_eq(out[i], divergent_ref(in[i]), "i=%u in=%d: %d != %d", i, in[i], out[i],
                                     divergent_ref(in[i]));
                isa_mem_fini(&m);
        }
}

Test(isa, reduce_lds) {
        static const Shape shapes[] = { { 1, 64 }, { 1000, 256 }, { 4097, 128 }, { 300, 32 }, { 64, 2 } };
        for (size_t t = 0; t < ELEMS_(shapes); t++) {
                const Shape *s = &shapes[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint32_t *in, *out, groups = (s->n + s->wg - 1) / s->wg;
                load(&m, "reduce-lds.hsaco", "reduce_lds", &k);
                cr_assert_eq(k.group_segment_size, 1024);
                uint64_t iv = isa_mem_alloc(&m, 4 * s->n, (void **) &in), ov = isa_mem_alloc(&m, 4 * groups, (void **) &out);
                for (uint32_t i = 0; i < s->n; i++)
                        in[i] = rnd() % 1000;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t g = 0; g < groups; g++) {
                        uint32_t e = 0;
                        for (uint32_t i = g * s->wg; i < (g + 1) * s->wg && i < s->n; i++)
                                e += in[i];
                        cr_assert_eq(out[g], e, "n=%u wg=%u group %u: %u != %u", s->n, s->wg, g, out[g], e);
                }
                isa_mem_fini(&m);
        }
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

Test(isa, atomics) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint32_t *in, *hist, *counter, *slots, *sub;
                int32_t *minmax;
                load(&m, "atomics.hsaco", "atomics", &k);
                uint64_t iv = isa_mem_alloc(&m, 4 * s->n, (void **) &in), hv = isa_mem_alloc(&m, 64, (void **) &hist),
                         cv = isa_mem_alloc(&m, 4, (void **) &counter), sv = isa_mem_alloc(&m, 4 * s->n, (void **) &slots),
                         mv = isa_mem_alloc(&m, 8, (void **) &minmax), bv = isa_mem_alloc(&m, 24, (void **) &sub);
                uint32_t ehist[16] = { 0 }, esub0 = 1u << 30, eor = 0, exor = 0;
                int32_t emin = INT32_MAX, emax = INT32_MIN;
                minmax[0] = INT32_MAX, minmax[1] = INT32_MIN;
                sub[0] = 1u << 30, sub[4] = 0xffffffffu;
                for (uint32_t i = 0; i < s->n; i++) {
                        uint32_t v = in[i] = rnd() % 5000;
                        ehist[v & 15]++;
                        emin = (int32_t) v - 1000 < emin ? (int32_t) v - 1000 : emin;
                        emax = (int32_t) v - 1000 > emax ? (int32_t) v - 1000 : emax;
                        esub0 -= v & 7;
                        eor |= 1u << (v & 31);
                        exor ^= v;
                }
                isa_args_u64(&a, iv), isa_args_u64(&a, hv), isa_args_u64(&a, cv), isa_args_u64(&a, sv);
                isa_args_u64(&a, mv), isa_args_u64(&a, bv), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (unsigned b = 0; b < 16; b++)
                        cr_assert_eq(hist[b], ehist[b], "bin %u: %u != %u", b, hist[b], ehist[b]);
                cr_assert_eq(*counter, s->n);
                qsort(slots, s->n, 4, cmp_u32);
                uint32_t *sorted = malloc(4 * s->n);
                memcpy(sorted, in, 4 * s->n);
                qsort(sorted, s->n, 4, cmp_u32);
                cr_assert_eq(memcmp(slots, sorted, 4 * s->n), 0, "atomic_inc handed out slots twice");
                free(sorted);
                cr_assert_eq(minmax[0], emin);
                cr_assert_eq(minmax[1], emax);
                cr_assert_eq(sub[0], esub0);
                cr_assert_eq(sub[1], 42);
                cr_assert(sub[2] >= 1 && sub[2] <= s->n, "cmpxchg stored %u", sub[2]);
                cr_assert_eq(sub[3], eor);
                cr_assert_eq(sub[4], ~eor);
                cr_assert_eq(sub[5], exor);
                isa_mem_fini(&m);
        }
}

Test(isa, matmul_tiled) {
        static const uint32_t dims[][3] = { { 16, 16, 16 }, { 33, 17, 40 }, { 1, 1, 1 }, { 64, 48, 32 }, { 5, 70, 9 } };
        for (size_t t = 0; t < ELEMS_(dims); t++) {
                uint32_t M = dims[t][0], N = dims[t][1], K = dims[t][2];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                float *A, *B, *C;
                load(&m, "matmul-tiled.hsaco", "matmul_tiled", &k);
                uint64_t av = isa_mem_alloc(&m, 4 * M * K, (void **) &A), bv = isa_mem_alloc(&m, 4 * K * N, (void **) &B),
                         cv = isa_mem_alloc(&m, 4 * M * N, (void **) &C);
                for (uint32_t i = 0; i < M * K; i++)
                        A[i] = (float) (rnd() % 200) / 16.0f - 6.0f;
                for (uint32_t i = 0; i < K * N; i++)
                        B[i] = (float) (rnd() % 200) / 32.0f - 3.0f;
                isa_args_u64(&a, av), isa_args_u64(&a, bv), isa_args_u64(&a, cv);
                isa_args_u32(&a, M), isa_args_u32(&a, N), isa_args_u32(&a, K);
                uint32_t grid[3] = { (N + 15) / 16, (M + 15) / 16, 1 }, wg[3] = { 16, 16, 1 };
                int r = isa_launch(&m, &k, grid, wg, &a, 100000000, &res);
                cr_assert_eq(r, 0, "%s", res.message);
                for (uint32_t i = 0; i < M; i++)
                        for (uint32_t j = 0; j < N; j++) {
                                /* Inputs are multiples of 1/32 with small magnitude: every sum is exact. */
                                float e = 0.0f;
                                for (uint32_t q = 0; q < K; q++)
                                        e += A[i * K + q] * B[q * N + j];
                                cr_assert_eq(C[i * N + j], e, "%ux%ux%u C[%u][%u]: %f != %f", M, N, K, i, j, C[i * N + j], e);
                        }
                isa_mem_fini(&m);
        }
}

Test(isa, private_array) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint32_t *in, *out;
                load(&m, "private-array.hsaco", "private_array", &k);
                cr_assert_geq(k.private_segment_size, 256, "the kernel must use scratch");
                cr_assert(k.rsrc2 & 1, "SCRATCH_EN");
                uint64_t iv = isa_mem_alloc(&m, 4 * s->n, (void **) &in), ov = isa_mem_alloc(&m, 4 * s->n, (void **) &out);
                for (uint32_t i = 0; i < s->n; i++)
                        in[i] = rnd();
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++) {
                        uint32_t v = in[i], e = 0;
                        for (uint32_t j = 0; j < 16; j++)
                                e += v * ((v + j * 7) & 63) + i;
                        cr_assert_eq(out[i], e, "i=%u: %u != %u", i, out[i], e);
                }
                isa_mem_fini(&m);
        }
}

static uint64_t rotl64(uint64_t x, unsigned s) {
        s &= 63;
        return s ? (x << s) | (x >> (64 - s)) : x;
}

Test(isa, int64_math) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint64_t *x, *y, *out;
                load(&m, "int64-math.hsaco", "int64_math", &k);
                uint64_t xv = isa_mem_alloc(&m, 8 * s->n, (void **) &x), yv = isa_mem_alloc(&m, 8 * s->n, (void **) &y),
                         ov = isa_mem_alloc(&m, 32 * s->n, (void **) &out);
                for (uint32_t i = 0; i < s->n; i++) {
                        x[i] = (uint64_t) rnd() << 40 ^ (uint64_t) rnd() << 20 ^ rnd();
                        y[i] = i % 3 == 0 ? rnd() % 1000 : (uint64_t) rnd() << (rnd() % 40) ^ rnd();
                }
                isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, ov), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++) {
                        uint64_t X = x[i], Y = y[i] | 1, e[4];
                        int64_t SX = (int64_t) X;
                        e[0] = X * Y + (X >> 7) - (Y << 3);
                        e[1] = X / Y + X % Y;
                        e[2] = (uint64_t) (SX / (int64_t) (Y >> 40 | 3)) ^ rotl64(X, (unsigned) (Y & 63));
                        e[3] = (uint64_t) (((unsigned __int128) X * Y) >> 64) + (uint64_t) (SX >> 13) +
                               (uint64_t) ((int64_t) (((__int128) SX * (int64_t) Y) >> 64) + 5);
                        for (unsigned j = 0; j < 4; j++)
                                cr_assert_eq(out[4 * i + j], e[j], "i=%u part %u: x=%#lx y=%#lx: %#lx != %#lx", i, j,
                                             (unsigned long) X, (unsigned long) Y, (unsigned long) out[4 * i + j],
                                             (unsigned long) e[j]);
                }
                isa_mem_fini(&m);
        }
}

Test(isa, float_math) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                float *x, *y, *out;
                load(&m, "float-math.hsaco", "float_math", &k);
                uint64_t xv = isa_mem_alloc(&m, 4 * s->n, (void **) &x), yv = isa_mem_alloc(&m, 4 * s->n, (void **) &y),
                         ov = isa_mem_alloc(&m, 16 * s->n, (void **) &out);
                for (uint32_t i = 0; i < s->n; i++) {
                        x[i] = ((float) rnd() / 65536.0f - 128.0f) * (i % 5 == 0 ? 1e-20f : i % 7 == 0 ? 1e20f : 1.0f);
                        y[i] = (float) rnd() / 1024.0f - 8192.0f;
                        if (i % 11 == 0)
                                y[i] = 0.0f;
                }
                isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, ov), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++) {
                        float X = x[i], Y = y[i], e[4];
                        e[0] = X / Y;
                        e[1] = sqrtf(fabsf(X)) + 1.0f / sqrtf(fabsf(Y) + 1.0f);
                        e[2] = fminf(X, Y) * 3.0f - fmaxf(X, Y) + floorf(X) + (float) (int) Y;
                        /* Out of range, v_cvt_u32_f32 saturates (C leaves it undefined). */
                        float h = fabsf(X * 100.0f);
                        uint32_t u = h >= 4294967295.0f ? UINT32_MAX : (uint32_t) h;
                        e[3] = (float) (u % 7u) + 1.0f / (fabsf(X) + 0.5f);
                        /* Division is IEEE (div_scale/fmas/fixup): exact. The rest within a few ulp. */
                        cr_assert(memcmp(&out[4 * i], &e[0], 4) == 0 || (isnan(out[4 * i]) && isnan(e[0])),
                                  "i=%u %a / %a: %a != %a", i, X, Y, out[4 * i], e[0]);
                        /* Part 2 is contracted to an fma by clang: allow the rounding of its terms. */
                        float scale2 = fabsf(X) * 4.0f + fabsf(Y) * 5.0f;
                        cr_assert(close_f(out[4 * i + 1], e[1], 1e-6f), "i=%u part 1 x=%a y=%a: %a != %a", i, X, Y,
                                  out[4 * i + 1], e[1]);
                        cr_assert(fabsf(out[4 * i + 2] - e[2]) <= 1e-6f * scale2, "i=%u part 2 x=%a y=%a: %a != %a", i,
                                  X, Y, out[4 * i + 2], e[2]);
                        cr_assert(close_f(out[4 * i + 3], e[3], 1e-6f), "i=%u part 3 x=%a y=%a: %a != %a", i, X, Y,
                                  out[4 * i + 3], e[3]);
                }
                isa_mem_fini(&m);
        }
}

Test(isa, bytes_shorts) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint8_t *b, *ob;
                uint16_t *sh, *os;
                float *v, *ov;
                uint32_t *out;
                load(&m, "bytes-shorts.hsaco", "bytes_shorts", &k);
                uint64_t bv = isa_mem_alloc(&m, s->n + 1, (void **) &b), sv = isa_mem_alloc(&m, 2 * s->n, (void **) &sh),
                         vv = isa_mem_alloc(&m, 16 * s->n, (void **) &v), outv = isa_mem_alloc(&m, 4 * s->n, (void **) &out),
                         obv = isa_mem_alloc(&m, s->n + 1, (void **) &ob), osv = isa_mem_alloc(&m, 2 * s->n + 2, (void **) &os),
                         ovv = isa_mem_alloc(&m, 16 * s->n, (void **) &ov);
                for (uint32_t i = 0; i < s->n; i++) {
                        b[i] = (uint8_t) rnd();
                        sh[i] = (uint16_t) rnd();
                        for (unsigned j = 0; j < 4; j++)
                                v[4 * i + j] = (float) (rnd() % 1000) - 500.0f;
                }
                ob[s->n] = 0x5a;
                os[s->n] = 0x1234;
                isa_args_u64(&a, bv), isa_args_u64(&a, sv), isa_args_u64(&a, vv), isa_args_u64(&a, outv);
                isa_args_u64(&a, obv), isa_args_u64(&a, osv), isa_args_u64(&a, ovv), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++) {
                        cr_assert_eq(out[i], (uint32_t) b[i] * 3u + sh[i], "i=%u", i);
                        cr_assert_eq(ob[i], (uint8_t) (b[i] + 1), "i=%u", i);
                        cr_assert_eq(os[i], (uint16_t) (sh[i] ^ 0xa5a5), "i=%u", i);
                        for (unsigned j = 0; j < 4; j++)
                                cr_assert_eq(ov[4 * i + j], v[4 * i + 3 - j] * 2.0f, "i=%u lane %u", i, j);
                }
                cr_assert_eq(ob[s->n], 0x5a, "byte store past n");
                cr_assert_eq(os[s->n], 0x1234, "short store past n");
                isa_mem_fini(&m);
        }
}

/* Quotients must be bit-exact IEEE results, also where the hardware sequence
 * rescales (denormal results, exponent differences beyond 96 / 768). */
Test(isa, divide_ieee) {
        static const float fa[] = {
                1.0f, 1.0f, -7.0f, 3.0f, 1e-38f, 3e38f, 1e30f, 1e-30f, 1.4e-45f, 0.0f, 0.0f, 1.0f,
                INFINITY, INFINITY, NAN, 5.0f, 1e-40f, 2.5e-39f, 1e38f, -0.0f, 6e-39f, 1e20f,
        };
        static const float fb[] = {
                3.0f, 1e-40f, 2.0f, -0.0f, 1e10f, 1e-5f, 1e-30f, 1e30f, 3.0f, 0.0f, 5.0f, INFINITY,
                INFINITY, -2.0f, 1.0f, NAN, 1e-39f, 7e-39f, 0.1f, 4.0f, 1e30f, 3e-20f,
        };
        static const double da[] = {
                1.0, 1.0, -7.0, 3.0, 1e-300, 1.7e308, 1e250, 1e-250, 5e-324, 0.0, 0.0, 1.0,
                INFINITY, INFINITY, NAN, 5.0, 1e-310, 2.5e-308, 1e307, -0.0, 6e-309, 1e200,
        };
        static const double db[] = {
                3.0, 1e-310, 2.0, -0.0, 1e10, 1e-5, 1e-250, 1e250, 3.0, 0.0, 5.0, INFINITY,
                INFINITY, -2.0, 1.0, NAN, 1e-309, 7e-309, 0.1, 4.0, 1e300, 3e-120,
        };
        const uint32_t n = 22 + 4000;
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        float *x, *y, *q;
        double *c, *d, *r;
        load(&m, "divide.hsaco", "divide", &k);
        uint64_t xv = isa_mem_alloc(&m, 4 * n, (void **) &x), yv = isa_mem_alloc(&m, 4 * n, (void **) &y),
                 qv = isa_mem_alloc(&m, 4 * n, (void **) &q), cv = isa_mem_alloc(&m, 8 * n, (void **) &c),
                 dv = isa_mem_alloc(&m, 8 * n, (void **) &d), rv = isa_mem_alloc(&m, 8 * n, (void **) &r);
        for (uint32_t i = 0; i < n; i++) {
                if (i < 22) {
                        x[i] = fa[i], y[i] = fb[i], c[i] = da[i], d[i] = db[i];
                } else {
                        /* Random bit patterns: every exponent, denormals included. */
                        uint32_t u = rnd() << 8 ^ rnd(), v = rnd() << 8 ^ rnd();
                        uint64_t U = (uint64_t) rnd() << 40 ^ (uint64_t) rnd() << 20 ^ rnd(),
                                 V = (uint64_t) rnd() << 40 ^ (uint64_t) rnd() << 20 ^ rnd();
                        memcpy(&x[i], &u, 4), memcpy(&y[i], &v, 4), memcpy(&c[i], &U, 8), memcpy(&d[i], &V, 8);
                }
        }
        isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, qv);
        isa_args_u64(&a, cv), isa_args_u64(&a, dv), isa_args_u64(&a, rv), isa_args_u32(&a, n);
        Shape s = { n, 64 };
        launch_1d(&m, &k, &s, &a, &res);
        for (uint32_t i = 0; i < n; i++) {
                float e = x[i] / y[i];
                double E = c[i] / d[i];
                cr_assert(memcmp(&q[i], &e, 4) == 0 || (isnan(q[i]) && isnan(e)), "f32 %u: %a / %a = %a, expected %a", i,
                          x[i], y[i], q[i], e);
                cr_assert(memcmp(&r[i], &E, 8) == 0 || (isnan(r[i]) && isnan(E)), "f64 %u: %a / %a = %a, expected %a", i,
                          c[i], d[i], r[i], E);
        }
        isa_mem_fini(&m);
}

static int32_t sat_i32(int64_t v) {
        return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t) v;
}

static void int_builtins_ref(int32_t x, int32_t y, uint32_t o[16]) {
        uint32_t ux = (uint32_t) x, uy = (uint32_t) y;
        o[0] = (uint32_t) __builtin_popcount(ux) + (ux ? (uint32_t) __builtin_clz(ux) : 32u) * 64u +
               (uy ? (uint32_t) __builtin_ctz(uy) : 32u) * 4096u;
        o[1] = (uy & 31) ? (ux << (uy & 31)) | (ux >> (32 - (uy & 31))) : ux;
        o[2] = (uint32_t) (x & 0x7fffff) * (uint32_t) (y & 0x3fff) + (uint32_t) ((x >> 12) * (y >> 20)) + 7u;
        o[3] = (uint32_t) (((int64_t) x * y) >> 32) ^ (uint32_t) (((uint64_t) ux * uy) >> 32);
        o[4] = (uint32_t) llabs((int64_t) x - y) + (uint32_t) (x < 0 ? -(int64_t) x : x);
        o[5] = (uint32_t) (((int64_t) x + y) >> 1) + (uint32_t) (((int64_t) x + y + 1) >> 1);
        o[6] = (uint32_t) sat_i32((int64_t) x + y) ^ (uint32_t) sat_i32((int64_t) x - y);
        o[7] = (uint32_t) (x < -1000 ? -1000 : x > 1000 ? 1000 : x) + (uint32_t) (x < y ? x : y) - (ux > uy ? ux : uy);
        o[8] = (uint32_t) (x < y ? y : x) * 3u + (uint32_t) (x > y ? 11 : -11);
        o[9] = ((ux >> (uy & 15)) & 0xfff) | ((ux & 0xff) << 20);
        int8_t cx = (int8_t) x, cy = (int8_t) y;
        int16_t sx = (int16_t) x, sy = (int16_t) y;
        o[10] = (uint32_t) (int32_t) (int8_t) (cx * cy + cx / (cy | 1)) + (uint32_t) (int32_t) (int16_t) (sx * sy - sx % (sy | 1));
        o[11] = (uint32_t) (uint8_t) ((uint8_t) x + (uint8_t) y) + (uint32_t) (uint16_t) ((uint16_t) x >> 3);
        float f = (float) x * 1e6f;
        int32_t fi = isnan(f) ? 0 : f >= 2147483648.0f ? INT32_MAX : f <= -2147483648.0f ? INT32_MIN : (int32_t) f;
        o[12] = (uint32_t) fi ^ (uint32_t) (y < 0 ? 0 : y > 255 ? 255 : y);
        o[13] = (uint32_t) (x < 0 ? x / 7 : x % 13);
        o[14] = uy / (ux | 1u) + uy % (ux | 1u);
        o[15] = ((ux & 0xffff) << 16 | (uy & 0xffff)) + ((ux & ~0xf0f0f0f0u) | (uy & 0xf0f0f0f0u));
}

Test(isa, int_builtins) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                int32_t *x, *y;
                uint32_t *out;
                load(&m, "int-builtins.hsaco", "int_builtins", &k);
                uint64_t xv = isa_mem_alloc(&m, 4 * s->n, (void **) &x), yv = isa_mem_alloc(&m, 4 * s->n, (void **) &y),
                         ov = isa_mem_alloc(&m, 64 * s->n, (void **) &out);
                for (uint32_t i = 0; i < s->n; i++) {
                        static const int32_t special[] = { 0, 1, -1, INT32_MAX, INT32_MIN, 255, 256, -129 };
                        x[i] = i < 8 ? special[i] : (int32_t) (rnd() << 8 ^ rnd());
                        y[i] = i < 8 ? special[7 - i] : i % 3 ? (int32_t) (rnd() % 600) - 300 : (int32_t) (rnd() << 8 ^ rnd());
                }
                isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, ov), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++) {
                        uint32_t e[16];
                        int_builtins_ref(x[i], y[i], e);
                        for (unsigned j = 0; j < 16; j++)
                                cr_assert_eq(out[16 * i + j], e[j], "i=%u part %u x=%d y=%d: %#x != %#x", i, j, x[i], y[i],
                                             out[16 * i + j], e[j]);
                }
                isa_mem_fini(&m);
        }
}

Test(isa, float_builtins) {
        for (size_t t = 0; t < ELEMS_(shapes_1d); t++) {
                const Shape *s = &shapes_1d[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                float *x, *y, *out;
                double *dout;
                load(&m, "float-builtins.hsaco", "float_builtins", &k);
                uint64_t xv = isa_mem_alloc(&m, 4 * s->n, (void **) &x), yv = isa_mem_alloc(&m, 4 * s->n, (void **) &y),
                         ov = isa_mem_alloc(&m, 48 * s->n, (void **) &out), dv = isa_mem_alloc(&m, 16 * s->n, (void **) &dout);
                for (uint32_t i = 0; i < s->n; i++) {
                        x[i] = (float) (rnd() % 100000) / 100.0f - 500.0f;
                        y[i] = i % 9 == 0 ? 0.0f : (float) (rnd() % 100000) / 100.0f - 500.0f;
                }
                isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, ov), isa_args_u64(&a, dv), isa_args_u32(&a, s->n);
                launch_1d(&m, &k, s, &a, &res);
                for (uint32_t i = 0; i < s->n; i++) {
                        float X = x[i], Y = y[i], e[12];
                        int ex;
                        e[0] = expf(X * 0.01f);
                        e[1] = logf(fabsf(Y) + 1.0f);
                        e[2] = sinf(X * 0.01f) + cosf(Y * 0.01f);
                        e[3] = powf(fabsf(X) * 0.01f + 0.5f, 1.5f);
                        e[4] = fmodf(X, Y == 0.0f ? 1.0f : Y);
                        e[5] = hypotf(X, Y);
                        e[6] = copysignf(X, Y) + roundf(Y * 0.3f) + rintf(X * 0.7f) + ceilf(Y * 0.1f);
                        float fr = frexpf(X, &ex);
                        e[7] = ldexpf(fr, 3) + (float) ex;
                        e[8] = tanhf(X * 0.001f) + atan2f(Y, X + 0.5f);
                        e[9] = exp2f(X * 0.001f) + log2f(fabsf(X) + 2.0f) + 1.0f / sqrtf(fabsf(Y) + 1.0f);
                        e[10] = cbrtf(X) + fmaf(X, Y, 1.0f);
                        e[11] = fabsf(X) - truncf(Y * 0.5f);
                        /* The device library's functions are within a few ulp; allow 4e-6 of the largest term. */
                        for (unsigned j = 0; j < 12; j++) {
                                float tol = 4e-6f * (fabsf(e[j]) + (j == 2 || j == 8 ? 2.0f : 0.0f) + (j == 10 ? fabsf(X * Y) : 0.0f));
                                cr_assert(fabsf(out[12 * i + j] - e[j]) <= tol, "i=%u part %u x=%a y=%a: %a != %a", i, j, X, Y,
                                          out[12 * i + j], e[j]);
                        }
                        double dx = X, dy = Y;
                        double d0 = dx * dy + dx / (dy == 0.0 ? 3.0 : dy) - sqrt(fabs(dx));
                        double d1 = floor(dx * 0.37) + (double) (int64_t) (dy * 1e3) + fmax(dx, dy);
                        cr_assert(fabs(dout[2 * i] - d0) <= 1e-12 * (fabs(dx * dy) + fabs(d0) + 1.0), "i=%u: %a != %a", i,
                                  dout[2 * i], d0);
                        cr_assert_eq(dout[2 * i + 1], d1, "i=%u: %a != %a", i, dout[2 * i + 1], d1);
                }
                isa_mem_fini(&m);
        }
}

Test(isa, index_3d) {
        static const uint32_t dims[][6] = { /* nx, ny, nz, wg x, y, z */
                { 4, 4, 4, 4, 4, 4 }, { 9, 5, 7, 4, 2, 3 }, { 33, 2, 3, 32, 1, 2 }, { 1, 1, 40, 1, 1, 16 }, { 6, 7, 2, 3, 3, 2 },
        };
        for (size_t t = 0; t < ELEMS_(dims); t++) {
                const uint32_t *D = dims[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint32_t *out, total = D[0] * D[1] * D[2];
                load(&m, "index-3d.hsaco", "index_3d", &k);
                cr_assert_eq((k.rsrc2 >> 11) & 3, 2, "TIDIG_COMP_CNT must ask for v0, v1 and v2");
                uint64_t ov = isa_mem_alloc(&m, 8 * total, (void **) &out);
                isa_args_u64(&a, ov), isa_args_u32(&a, D[0]), isa_args_u32(&a, D[1]), isa_args_u32(&a, D[2]);
                uint32_t grid[3] = { (D[0] + D[3] - 1) / D[3], (D[1] + D[4] - 1) / D[4], (D[2] + D[5] - 1) / D[5] };
                uint32_t wg[3] = { D[3], D[4], D[5] };
                int r = isa_launch(&m, &k, grid, wg, &a, 100000000, &res);
                cr_assert_eq(r, 0, "%s", res.message);
                for (uint32_t z = 0; z < D[2]; z++)
                        for (uint32_t y = 0; y < D[1]; y++)
                                for (uint32_t x = 0; x < D[0]; x++) {
                                        uint32_t i = (z * D[1] + y) * D[0] + x;
                                        uint32_t e0 = ((x % D[3]) | (y % D[4]) << 8 | (z % D[5]) << 16) ^ (z / D[5]) << 24;
                                        uint32_t e1 = ((x / D[3]) | (y / D[4]) << 12) + D[5] * 100000u;
                                        cr_assert_eq(out[2 * i], e0, "(%u,%u,%u): %#x != %#x", x, y, z, out[2 * i], e0);
                                        cr_assert_eq(out[2 * i + 1], e1, "(%u,%u,%u): %#x != %#x", x, y, z, out[2 * i + 1], e1);
                                }
                isa_mem_fini(&m);
        }
}

/* Hardware partial workgroups (PARTIAL_TG_EN): the last workgroup of each
 * dimension is launched with fewer work-items, so the kernel's guard does not
 * matter (nx/ny/nz cover the whole rounded-up grid here); work-items past the
 * partial extents never run, and every local ID stays below the size of its
 * own workgroup. */
Test(isa, index_3d_partial_workgroups) {
        static const uint32_t dims[][6] = { /* total extents x, y, z; wg x, y, z */
                { 9, 5, 7, 4, 2, 3 }, { 33, 2, 3, 32, 1, 2 }, { 1, 1, 40, 1, 1, 16 }, { 70, 1, 1, 64, 1, 1 }, { 6, 7, 2, 3, 3, 2 },
        };
        for (size_t t = 0; t < ELEMS_(dims); t++) {
                const uint32_t *D = dims[t];
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint32_t grid[3], wg[3] = { D[3], D[4], D[5] }, partial[3], full[3], *out;
                for (unsigned i = 0; i < 3; i++) {
                        grid[i] = (D[i] + D[3 + i] - 1) / D[3 + i];
                        full[i] = grid[i] * D[3 + i];
                        partial[i] = D[i] - (grid[i] - 1) * D[3 + i];
                }
                uint32_t total = full[0] * full[1] * full[2];
                load(&m, "index-3d.hsaco", "index_3d", &k);
                uint64_t ov = isa_mem_alloc(&m, 8ull * total, (void **) &out);
                memset(out, 0xA5, 8ull * total);
                /* The guard extents are the full rounded-up grid: only the hardware limits the work-items. */
                isa_args_u64(&a, ov), isa_args_u32(&a, full[0]), isa_args_u32(&a, full[1]), isa_args_u32(&a, full[2]);
                int r = isa_launch_partial(&m, &k, grid, wg, partial, &a, 100000000, &res);
                cr_assert_eq(r, 0, "%s", res.message);
                for (uint32_t z = 0; z < full[2]; z++)
                        for (uint32_t y = 0; y < full[1]; y++)
                                for (uint32_t x = 0; x < full[0]; x++) {
                                        uint32_t i = (z * full[1] + y) * full[0] + x;
                                        if (x >= D[0] || y >= D[1] || z >= D[2]) {
                                                cr_assert_eq(out[2 * i], 0xA5A5A5A5u, "(%u,%u,%u) beyond the partial "
                                                             "workgroup ran", x, y, z);
                                                continue;
                                        }
                                        /* get_local_size(2) comes from the dispatch packet: partial in the last group. */
                                        uint32_t lsz = z / D[5] == grid[2] - 1 ? partial[2] : D[5];
                                        uint32_t e0 = ((x % D[3]) | (y % D[4]) << 8 | (z % D[5]) << 16) ^ (z / D[5]) << 24;
                                        uint32_t e1 = ((x / D[3]) | (y / D[4]) << 12) + lsz * 100000u;
                                        cr_assert_eq(out[2 * i], e0, "(%u,%u,%u): %#x != %#x", x, y, z, out[2 * i], e0);
                                        cr_assert_eq(out[2 * i + 1], e1, "(%u,%u,%u): %#x != %#x", x, y, z, out[2 * i + 1], e1);
                                }
                isa_mem_fini(&m);
        }
}

/* A partial workgroup has only the waves its work-items fill: vector_add over
 * 70 items in workgroups of 64 runs 2 + 1 waves, not 2 + 2. */
Test(isa, partial_workgroup_launches_fewer_waves) {
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult full_res, part_res;
        float *z;
        uint32_t grid[3] = { 2, 1, 1 }, wg[3] = { 64, 1, 1 }, partial[3] = { 6, 1, 1 };
        load(&m, "vector-add.hsaco", "vector_add", &k);
        uint64_t xv = isa_mem_alloc(&m, 4 * 128, NULL), yv = isa_mem_alloc(&m, 4 * 128, NULL),
                 zv = isa_mem_alloc(&m, 4 * 128, (void **) &z);
        isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, zv), isa_args_u32(&a, 128);
        cr_assert_eq(isa_launch(&m, &k, grid, wg, &a, 0, &full_res), 0, "%s", full_res.message);
        memset(z, 0xA5, 4 * 128);
        cr_assert_eq(isa_launch_partial(&m, &k, grid, wg, partial, &a, 0, &part_res), 0, "%s", part_res.message);
        cr_assert_lt(part_res.wave_instructions, full_res.wave_instructions);
        cr_assert_eq(full_res.wave_instructions % 4, 0, "4 identical waves");
        cr_assert_eq(part_res.wave_instructions, full_res.wave_instructions / 4 * 3, "3 waves of the same program");
        for (unsigned i = 0; i < 128; i++)
                if (i < 70)
                        cr_assert_eq(z[i], 0.0f, "i=%u", i);
                else
                        cr_assert_eq(((uint32_t *) z)[i], 0xA5A5A5A5u, "i=%u ran past the partial workgroup", i);
        isa_mem_fini(&m);
}
