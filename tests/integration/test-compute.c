/* SPDX-License-Identifier: MIT */
/*
 * Compute through the broker, end to end: the OpenCL kernels of
 * tests/kernels, built for gfx1030 with clang, loaded through libkfdbroker
 * into the real daemon on the simulated GPU and dispatched over several grid
 * shapes — partial workgroups included (a grid that is not a multiple of the
 * block) — with every output element checked against the same computation
 * on the CPU, and the bytes past the output left alone. Then dynamic LDS,
 * and a copy -> dispatch -> copy chain ordered by events on the GPU.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;
static kfdb_session *s;

static void setup(void) {
        int r;

        compute_require_kernels();
        test_daemon_start(&d, NULL);
        r = kfdb_session_new(d.sock, "compute", &s);
        cr_assert_eq(r, 0, "%s", strerror(-r));
}

static void teardown(void) {
        kfdb_session_free(s);
        s = NULL;
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(compute, .init = setup, .fini = teardown, .timeout = 600);

/* 1D shapes: a single work-item, partial last workgroups, exact multiples,
 * one larger grid. */
static const struct {
        uint32_t n, block;
} shapes_1d[] = {
        { 1, 1 }, { 1000, 64 }, { 4096, 256 }, { 333, 128 }, { 65553, 256 },
};
#define PAD 64u /* elements after the output that must stay untouched */

/* The uint32 words after n elements of size esize still hold the poison byte. */
static void assert_untouched(const void *map, size_t n, size_t esize, uint8_t poison, const char *what) {
        const uint8_t *p = (const uint8_t *) map + n * esize;

        for (size_t i = 0; i < PAD * esize; i++)
                cr_assert_eq(p[i], poison, "%s: byte %zu past the output was written", what, i);
}

Test(compute, device_announces_compute) {
        uint32_t queues = 0;

        cr_assert(kfdb_session_has_feature(s, "compute"));
        cr_assert_eq(kfdb_device_compute_queues(s, &queues), 0);
        cr_assert_geq(queues, 1);
}

Test(compute, vector_add) {
        kfdb_code_object *co = load_kernel(s, "vector-add");

        for (size_t t = 0; t < sizeof(shapes_1d) / sizeof(shapes_1d[0]); t++) {
                uint32_t n = shapes_1d[t].n, block = shapes_1d[t].block;
                float *a, *b, *c;
                kfdb_buffer *ba = new_buffer(s, n * 4, 0, (void **) &a);
                kfdb_buffer *bb = new_buffer(s, n * 4, 0, (void **) &b);
                kfdb_buffer *bc = new_buffer(s, (n + PAD) * 4, 0xA5, (void **) &c);

                for (uint32_t i = 0; i < n; i++) {
                        a[i] = (float) i * 0.5f - 3.0f;
                        b[i] = 1000.0f - (float) i * 0.25f;
                }
                kfdb_arg args[] = { kfdb_arg_buffer(ba, 0), kfdb_arg_buffer(bb, 0), kfdb_arg_buffer(bc, 0),
                                    kfdb_arg_value(&n, 4) };
                run_dispatch(s, co, "vector_add", 1, &n, &block, args, 4);
                for (uint32_t i = 0; i < n; i++) {
                        float want = a[i] + b[i];
                        cr_assert_eq(memcmp(&c[i], &want, 4), 0, "n=%u block=%u: c[%u] = %g, expected %g", n,
                                     block, i, (double) c[i], (double) want);
                }
                assert_untouched(c, n, 4, 0xA5, "vector_add");
                kfdb_buffer_free(ba);
                kfdb_buffer_free(bb);
                kfdb_buffer_free(bc);
        }
        kfdb_code_object_free(co);
}

Test(compute, saxpy) {
        kfdb_code_object *co = load_kernel(s, "saxpy");
        const float alpha = -1.75f;

        for (size_t t = 0; t < sizeof(shapes_1d) / sizeof(shapes_1d[0]); t++) {
                uint32_t n = shapes_1d[t].n, block = shapes_1d[t].block;
                float *x, *y;
                kfdb_buffer *bx = new_buffer(s, n * 4, 0, (void **) &x);
                kfdb_buffer *by = new_buffer(s, (n + PAD) * 4, 0x5A, (void **) &y);

                for (uint32_t i = 0; i < n; i++) {
                        x[i] = (float) (i % 1013) * 0.125f - 50.0f;
                        y[i] = (float) (i % 97) * 3.0f + 0.5f;
                }
                kfdb_arg args[] = { kfdb_arg_value(&alpha, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0),
                                    kfdb_arg_value(&n, 4) };
                run_dispatch(s, co, "saxpy", 1, &n, &block, args, 4);
                for (uint32_t i = 0; i < n; i++) {
                        float want = fmaf(alpha, (float) (i % 1013) * 0.125f - 50.0f, (float) (i % 97) * 3.0f + 0.5f);
                        cr_assert_eq(memcmp(&y[i], &want, 4), 0, "n=%u block=%u: y[%u] = %g, expected %g", n,
                                     block, i, (double) y[i], (double) want);
                }
                assert_untouched(y, n, 4, 0x5A, "saxpy");
                kfdb_buffer_free(bx);
                kfdb_buffer_free(by);
        }
        kfdb_code_object_free(co);
}

Test(compute, index_2d) {
        static const struct {
                uint32_t w, h, bx, by;
        } shapes[] = { { 100, 37, 16, 8 }, { 64, 64, 16, 16 }, { 1, 1, 1, 1 }, { 250, 3, 32, 4 }, { 7, 300, 2, 64 } };
        kfdb_code_object *co = load_kernel(s, "index-2d");

        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t w = shapes[t].w, h = shapes[t].h, n = w * h;
                uint32_t grid[2] = { w, h }, block[2] = { shapes[t].bx, shapes[t].by };
                int32_t *in, *out;
                kfdb_buffer *bi = new_buffer(s, n * 4, 0, (void **) &in);
                kfdb_buffer *bo = new_buffer(s, (n + PAD) * 4, 0xC3, (void **) &out);

                for (uint32_t i = 0; i < n; i++)
                        in[i] = (int32_t) (i * 3) - 7;
                kfdb_arg args[] = { kfdb_arg_buffer(bi, 0), kfdb_arg_buffer(bo, 0), kfdb_arg_value(&w, 4),
                                    kfdb_arg_value(&h, 4) };
                run_dispatch(s, co, "index_2d", 2, grid, block, args, 4);
                for (uint32_t y = 0; y < h; y++)
                        for (uint32_t x = 0; x < w; x++) {
                                uint32_t i = y * w + x;
                                int32_t want = (int32_t) (x * 1000 + y) + in[i] +
                                               (int32_t) ((x % block[0]) * 7 + (y % block[1]) * 13 +
                                                          (x / block[0]) * 17 + (y / block[1]) * 19);
                                cr_assert_eq(out[i], want, "%ux%u block %ux%u: out[%u][%u] = %d, expected %d", w, h,
                                             block[0], block[1], y, x, out[i], want);
                        }
                assert_untouched(out, n, 4, 0xC3, "index_2d");
                kfdb_buffer_free(bi);
                kfdb_buffer_free(bo);
        }
        kfdb_code_object_free(co);
}

Test(compute, index_3d) {
        static const struct {
                uint32_t nx, ny, nz, bx, by, bz;
        } shapes[] = { { 10, 7, 5, 4, 4, 2 }, { 8, 8, 8, 8, 4, 2 }, { 3, 1, 9, 1, 1, 4 } };
        kfdb_code_object *co = load_kernel(s, "index-3d");

        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t nx = shapes[t].nx, ny = shapes[t].ny, nz = shapes[t].nz, n = nx * ny * nz;
                uint32_t grid[3] = { nx, ny, nz }, block[3] = { shapes[t].bx, shapes[t].by, shapes[t].bz };
                uint32_t *out;
                kfdb_buffer *bo = new_buffer(s, (2 * n + PAD) * 4, 0x3C, (void **) &out);

                kfdb_arg args[] = { kfdb_arg_buffer(bo, 0), kfdb_arg_value(&nx, 4), kfdb_arg_value(&ny, 4),
                                    kfdb_arg_value(&nz, 4) };
                run_dispatch(s, co, "index_3d", 3, grid, block, args, 4);
                for (uint32_t z = 0; z < nz; z++)
                        for (uint32_t y = 0; y < ny; y++)
                                for (uint32_t x = 0; x < nx; x++) {
                                        uint32_t i = (z * ny + y) * nx + x;
                                        uint32_t gx = x / block[0], gy = y / block[1], gz = z / block[2];
                                        /* get_local_size(2) of a partial last workgroup is what is left. */
                                        uint32_t lsz = gz < nz / block[2] ? block[2] : nz % block[2];
                                        uint32_t w0 = ((x % block[0]) | (y % block[1]) << 8 | (z % block[2]) << 16) ^
                                                      (gz << 24);
                                        uint32_t w1 = (gx | gy << 12) + lsz * 100000u;
                                        cr_assert_eq(out[2 * i], w0, "shape %zu: (%u,%u,%u) word 0 = 0x%x, expected 0x%x",
                                                     t, x, y, z, out[2 * i], w0);
                                        cr_assert_eq(out[2 * i + 1], w1, "shape %zu: (%u,%u,%u) word 1 = %u, expected %u",
                                                     t, x, y, z, out[2 * i + 1], w1);
                                }
                assert_untouched(out, 2 * n, 4, 0x3C, "index_3d");
                kfdb_buffer_free(bo);
        }
        kfdb_code_object_free(co);
}

static uint32_t collatz_steps(uint32_t v) {
        uint32_t steps = 0;

        while (v > 1 && steps < 100000) {
                v = (v & 1) ? 3 * v + 1 : v / 2;
                steps++;
        }
        return steps;
}

Test(compute, collatz_data_dependent_loop) {
        kfdb_code_object *co = load_kernel(s, "collatz");

        for (size_t t = 0; t < 4; t++) {
                uint32_t n = shapes_1d[t].n, block = shapes_1d[t].block;
                uint32_t *in, *out;
                kfdb_buffer *bi = new_buffer(s, n * 4, 0, (void **) &in);
                kfdb_buffer *bo = new_buffer(s, (n + PAD) * 4, 0x77, (void **) &out);

                for (uint32_t i = 0; i < n; i++)
                        in[i] = i % 3 == 0 ? i + 1 : (uint32_t) (splitmix64(i) % 100000u);
                kfdb_arg args[] = { kfdb_arg_buffer(bi, 0), kfdb_arg_buffer(bo, 0), kfdb_arg_value(&n, 4) };
                run_dispatch(s, co, "collatz", 1, &n, &block, args, 3);
                for (uint32_t i = 0; i < n; i++)
                        cr_assert_eq(out[i], collatz_steps(in[i]), "n=%u: steps(%u) = %u, expected %u", n, in[i],
                                     out[i], collatz_steps(in[i]));
                assert_untouched(out, n, 4, 0x77, "collatz");
                kfdb_buffer_free(bi);
                kfdb_buffer_free(bo);
        }
        kfdb_code_object_free(co);
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

Test(compute, divergent_branches) {
        kfdb_code_object *co = load_kernel(s, "divergent");

        for (size_t t = 0; t < sizeof(shapes_1d) / sizeof(shapes_1d[0]); t++) {
                uint32_t n = shapes_1d[t].n, block = shapes_1d[t].block;
                int32_t *in, *out;
                kfdb_buffer *bi = new_buffer(s, n * 4, 0, (void **) &in);
                kfdb_buffer *bo = new_buffer(s, (n + PAD) * 4, 0x11, (void **) &out);

                for (uint32_t i = 0; i < n; i++)
                        in[i] = (int32_t) ((i * 37u) % 401u) - 200;
                kfdb_arg args[] = { kfdb_arg_buffer(bi, 0), kfdb_arg_buffer(bo, 0), kfdb_arg_value(&n, 4) };
                run_dispatch(s, co, "divergent", 1, &n, &block, args, 3);
                for (uint32_t i = 0; i < n; i++)
                        cr_assert_eq(out[i], divergent_ref(in[i]), "n=%u: f(%d) = %d, expected %d", n, in[i], out[i],
                                     divergent_ref(in[i]));
                assert_untouched(out, n, 4, 0x11, "divergent");
                kfdb_buffer_free(bi);
                kfdb_buffer_free(bo);
        }
        kfdb_code_object_free(co);
}

/* reduce_lds and local_sum sum a whole workgroup in LDS: their grids are
 * rounded up to whole workgroups (lanes past n contribute 0), since in a
 * partial workgroup the missing lanes would leave their LDS slots unwritten. */
Test(compute, reduce_lds_with_barriers) {
        static const struct {
                uint32_t n, block;
        } shapes[] = { { 1000, 256 }, { 4096, 128 }, { 77, 64 }, { 1, 1 }, { 65553, 256 } };
        kfdb_code_object *co = load_kernel(s, "reduce-lds");

        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t n = shapes[t].n, block = shapes[t].block;
                uint32_t groups = (n + block - 1) / block, grid = groups * block;
                uint32_t *in, *out;
                kfdb_buffer *bi = new_buffer(s, n * 4, 0, (void **) &in);
                kfdb_buffer *bo = new_buffer(s, (groups + PAD) * 4, 0x99, (void **) &out);

                for (uint32_t i = 0; i < n; i++)
                        in[i] = (uint32_t) splitmix64(i);
                kfdb_arg args[] = { kfdb_arg_buffer(bi, 0), kfdb_arg_buffer(bo, 0), kfdb_arg_value(&n, 4) };
                run_dispatch(s, co, "reduce_lds", 1, &grid, &block, args, 3);
                for (uint32_t g = 0; g < groups; g++) {
                        uint32_t want = 0;
                        for (uint32_t i = g * block; i < n && i < (g + 1) * block; i++)
                                want += in[i];
                        cr_assert_eq(out[g], want, "n=%u block=%u: partial[%u] = %u, expected %u", n, block, g,
                                     out[g], want);
                }
                assert_untouched(out, groups, 4, 0x99, "reduce_lds");
                kfdb_buffer_free(bi);
                kfdb_buffer_free(bo);
        }
        kfdb_code_object_free(co);
}

Test(compute, dynamic_lds_local_pointer_arguments) {
        static const struct {
                uint32_t n, block;
        } shapes[] = { { 1000, 256 }, { 100, 32 }, { 1, 1 } };
        kfdb_code_object *co = load_kernel(s, "local-sum");

        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t n = shapes[t].n, block = shapes[t].block;
                uint32_t groups = (n + block - 1) / block, grid = groups * block;
                uint32_t *in, *out;
                kfdb_buffer *bi = new_buffer(s, n * 4, 0, (void **) &in);
                kfdb_buffer *bo = new_buffer(s, (2 * groups + PAD) * 4, 0x42, (void **) &out);

                for (uint32_t i = 0; i < n; i++)
                        in[i] = (uint32_t) (splitmix64(i + 7) % 1000000u);
                /* Two regions: both must be distinct and each large enough. */
                kfdb_arg args[] = { kfdb_arg_buffer(bi, 0), kfdb_arg_buffer(bo, 0), kfdb_arg_value(&n, 4),
                                    kfdb_arg_local(block * 4), kfdb_arg_local(block * 4) };
                run_dispatch(s, co, "local_sum", 1, &grid, &block, args, 5);
                for (uint32_t g = 0; g < groups; g++) {
                        uint32_t sum = 0, max = 0;
                        for (uint32_t i = g * block; i < n && i < (g + 1) * block; i++) {
                                sum += in[i];
                                max = in[i] > max ? in[i] : max;
                        }
                        cr_assert_eq(out[2 * g], sum, "n=%u block=%u: sum of group %u = %u, expected %u", n, block,
                                     g, out[2 * g], sum);
                        cr_assert_eq(out[2 * g + 1], max, "n=%u block=%u: max of group %u = %u, expected %u", n,
                                     block, g, out[2 * g + 1], max);
                }
                assert_untouched(out, 2 * groups, 4, 0x42, "local_sum");
                kfdb_buffer_free(bi);
                kfdb_buffer_free(bo);
        }
        kfdb_code_object_free(co);
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

Test(compute, global_atomics) {
        kfdb_code_object *co = load_kernel(s, "atomics");

        for (size_t t = 1; t < sizeof(shapes_1d) / sizeof(shapes_1d[0]); t++) {
                uint32_t n = shapes_1d[t].n, block = shapes_1d[t].block;
                uint32_t *in, *hist, *counter, *slots, *sub, *sorted;
                int32_t *minmax;
                uint32_t want_hist[16] = { 0 }, or_bits = 0, xor_v = 0, sub0 = 1000000;
                int32_t vmin = INT32_MAX, vmax = INT32_MIN;
                kfdb_buffer *bi = new_buffer(s, n * 4, 0, (void **) &in);
                kfdb_buffer *bh = new_buffer(s, 16 * 4, 0, (void **) &hist);
                kfdb_buffer *bc = new_buffer(s, 4, 0, (void **) &counter);
                kfdb_buffer *bs = new_buffer(s, (n + PAD) * 4, 0xEE, (void **) &slots);
                kfdb_buffer *bm = new_buffer(s, 8, 0, (void **) &minmax);
                kfdb_buffer *bu = new_buffer(s, 6 * 4, 0, (void **) &sub);

                for (uint32_t i = 0; i < n; i++) {
                        in[i] = (uint32_t) ((i * 2654435761u) % 5000u);
                        want_hist[in[i] & 15]++;
                        vmin = (int32_t) in[i] - 1000 < vmin ? (int32_t) in[i] - 1000 : vmin;
                        vmax = (int32_t) in[i] - 1000 > vmax ? (int32_t) in[i] - 1000 : vmax;
                        sub0 -= in[i] & 7;
                        or_bits |= 1u << (in[i] & 31);
                        xor_v ^= in[i];
                }
                minmax[0] = INT32_MAX;
                minmax[1] = INT32_MIN;
                sub[0] = 1000000;
                sub[4] = 0xFFFFFFFFu;
                kfdb_arg args[] = { kfdb_arg_buffer(bi, 0), kfdb_arg_buffer(bh, 0), kfdb_arg_buffer(bc, 0),
                                    kfdb_arg_buffer(bs, 0), kfdb_arg_buffer(bm, 0), kfdb_arg_buffer(bu, 0),
                                    kfdb_arg_value(&n, 4) };
                run_dispatch(s, co, "atomics", 1, &n, &block, args, 7);

                for (unsigned k = 0; k < 16; k++)
                        cr_assert_eq(hist[k], want_hist[k], "n=%u: hist[%u] = %u, expected %u", n, k, hist[k],
                                     want_hist[k]);
                cr_assert_eq(counter[0], n, "n=%u: every work-item took one slot", n);
                /* The slots hold exactly the inputs, in some order. */
                sorted = malloc(2 * n * sizeof(uint32_t));
                cr_assert(sorted);
                memcpy(sorted, in, n * 4);
                memcpy(sorted + n, slots, n * 4);
                qsort(sorted, n, 4, cmp_u32);
                qsort(sorted + n, n, 4, cmp_u32);
                cr_assert_eq(memcmp(sorted, sorted + n, n * 4), 0, "n=%u: the slots are not a permutation of the inputs", n);
                free(sorted);
                assert_untouched(slots, n, 4, 0xEE, "atomics slots");
                cr_assert_eq(minmax[0], vmin);
                cr_assert_eq(minmax[1], vmax);
                cr_assert_eq(sub[0], sub0);
                cr_assert_eq(sub[1], 42u);
                cr_assert(sub[2] >= 1 && sub[2] <= n, "cmpxchg winner %u", sub[2]);
                cr_assert_eq(sub[3], or_bits);
                cr_assert_eq(sub[4], ~or_bits);
                cr_assert_eq(sub[5], xor_v);
                kfdb_buffer_free(bi);
                kfdb_buffer_free(bh);
                kfdb_buffer_free(bc);
                kfdb_buffer_free(bs);
                kfdb_buffer_free(bm);
                kfdb_buffer_free(bu);
        }
        kfdb_code_object_free(co);
}

/* Tiles of 16x16 staged in LDS: the grid is whole tiles (the kernel guards
 * rows and columns past m and n), for the reason given at reduce_lds. Small
 * integer values keep every sum exact whatever the order of the adds. */
Test(compute, matmul_tiled) {
        static const struct {
                uint32_t m, n, k;
        } shapes[] = { { 37, 45, 29 }, { 32, 32, 32 }, { 1, 1, 1 }, { 16, 70, 5 } };
        kfdb_code_object *co = load_kernel(s, "matmul-tiled");

        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t m = shapes[t].m, n = shapes[t].n, k = shapes[t].k;
                uint32_t grid[2] = { (n + 15) / 16 * 16, (m + 15) / 16 * 16 }, block[2] = { 16, 16 };
                float *a, *b, *c;
                kfdb_buffer *ba = new_buffer(s, m * k * 4, 0, (void **) &a);
                kfdb_buffer *bb = new_buffer(s, k * n * 4, 0, (void **) &b);
                kfdb_buffer *bc = new_buffer(s, (m * n + PAD) * 4, 0xB7, (void **) &c);

                for (uint32_t i = 0; i < m * k; i++)
                        a[i] = (float) ((int) (splitmix64(i) % 9) - 4);
                for (uint32_t i = 0; i < k * n; i++)
                        b[i] = (float) ((int) (splitmix64(i + 100000) % 9) - 4);
                kfdb_arg args[] = { kfdb_arg_buffer(ba, 0), kfdb_arg_buffer(bb, 0), kfdb_arg_buffer(bc, 0),
                                    kfdb_arg_value(&m, 4), kfdb_arg_value(&n, 4), kfdb_arg_value(&k, 4) };
                run_dispatch(s, co, "matmul_tiled", 2, grid, block, args, 6);
                for (uint32_t r = 0; r < m; r++)
                        for (uint32_t col = 0; col < n; col++) {
                                float want = 0.0f;
                                for (uint32_t j = 0; j < k; j++)
                                        want += a[r * k + j] * b[j * n + col];
                                cr_assert_eq(c[r * n + col], want, "%ux%ux%u: c[%u][%u] = %g, expected %g", m, n, k, r,
                                             col, (double) c[r * n + col], (double) want);
                        }
                assert_untouched(c, m * n, 4, 0xB7, "matmul_tiled");
                kfdb_buffer_free(ba);
                kfdb_buffer_free(bb);
                kfdb_buffer_free(bc);
        }
        kfdb_code_object_free(co);
}

/* A private array of 64 dwords indexed at run time lives in scratch, which
 * clang reaches with buffer instructions through the private segment buffer
 * V# the daemon builds: the simulated GPU honours that V# (FORMAT,
 * RESOURCE_LEVEL, OOB_SELECT, NUM_RECORDS, INDEX_STRIDE), so a wrong one
 * reads zeros here as it would on hardware. Wave32 and wave64 builds. */
static void private_arrays(const char *file) {
        kfdb_code_object *co = load_kernel(s, file);
        const kfdb_kernel *k = kfdb_code_object_find_kernel(co, "private_array");

        cr_assert_gt(kfdb_kernel_get_private_segment_size(k), 0, "%s: the kernel uses scratch", file);
        for (size_t t = 0; t < 4; t++) {
                uint32_t n = shapes_1d[t].n, block = shapes_1d[t].block;
                uint32_t *in, *out;
                kfdb_buffer *bi = new_buffer(s, n * 4, 0, (void **) &in);
                kfdb_buffer *bo = new_buffer(s, (n + PAD) * 4, 0x2D, (void **) &out);

                for (uint32_t i = 0; i < n; i++)
                        in[i] = i * 7 + 3;
                kfdb_arg args[] = { kfdb_arg_buffer(bi, 0), kfdb_arg_buffer(bo, 0), kfdb_arg_value(&n, 4) };
                run_dispatch(s, co, "private_array", 1, &n, &block, args, 3);
                for (uint32_t i = 0; i < n; i++) {
                        uint32_t a[64], v = in[i], acc = 0;
                        for (uint32_t j = 0; j < 64; j++)
                                a[j] = v * j + i;
                        for (uint32_t j = 0; j < 16; j++)
                                acc += a[(v + j * 7) & 63];
                        cr_assert_eq(out[i], acc, "%s, n=%u: out[%u] = %u, expected %u", file, n, i, out[i], acc);
                }
                assert_untouched(out, n, 4, 0x2D, "private_array");
                kfdb_buffer_free(bi);
                kfdb_buffer_free(bo);
        }
        kfdb_code_object_free(co);
}

Test(compute, private_arrays_in_scratch) {
        private_arrays("private-array");
        private_arrays("private-array-w64");
}

static uint64_t mul_hi_u64(uint64_t a, uint64_t b) {
        return (uint64_t) (((unsigned __int128) a * b) >> 64);
}

static int64_t mul_hi_s64(int64_t a, int64_t b) {
        return (int64_t) (((__int128) a * b) >> 64);
}

static uint64_t rotl64(uint64_t x, uint64_t n) {
        n &= 63;
        return n ? (x << n) | (x >> (64 - n)) : x;
}

Test(compute, int64_math) {
        kfdb_code_object *co = load_kernel(s, "int64-math");

        for (size_t t = 0; t < 4; t++) {
                uint32_t n = shapes_1d[t].n, block = shapes_1d[t].block;
                uint64_t *a, *b, *out;
                kfdb_buffer *ba = new_buffer(s, n * 8, 0, (void **) &a);
                kfdb_buffer *bb = new_buffer(s, n * 8, 0, (void **) &b);
                kfdb_buffer *bo = new_buffer(s, (4 * n + PAD) * 8, 0x6B, (void **) &out);

                for (uint32_t i = 0; i < n; i++) {
                        a[i] = splitmix64(i);
                        b[i] = i % 5 == 0 ? splitmix64(i + 1000) >> 40 : splitmix64(i + 1000);
                }
                kfdb_arg args[] = { kfdb_arg_buffer(ba, 0), kfdb_arg_buffer(bb, 0), kfdb_arg_buffer(bo, 0),
                                    kfdb_arg_value(&n, 4) };
                run_dispatch(s, co, "int64_math", 1, &n, &block, args, 4);
                for (uint32_t i = 0; i < n; i++) {
                        uint64_t x = a[i], y = b[i] | 1, w[4];
                        int64_t sx = (int64_t) x;
                        w[0] = x * y + (x >> 7) - (y << 3);
                        w[1] = x / y + x % y;
                        w[2] = (uint64_t) (sx / (int64_t) (y >> 40 | 3)) ^ rotl64(x, y & 63);
                        w[3] = mul_hi_u64(x, y) + (uint64_t) (sx >> 13) + (uint64_t) (mul_hi_s64((int64_t) x, (int64_t) y) + 5);
                        for (unsigned k = 0; k < 4; k++)
                                cr_assert_eq(out[4 * i + k], w[k], "n=%u: out[%u][%u] = 0x%llx, expected 0x%llx", n, i, k,
                                             (unsigned long long) out[4 * i + k], (unsigned long long) w[k]);
                }
                assert_untouched(out, 4 * n, 8, 0x6B, "int64_math");
                kfdb_buffer_free(ba);
                kfdb_buffer_free(bb);
                kfdb_buffer_free(bo);
        }
        kfdb_code_object_free(co);
}

/* Polls until fence is done or not, within 60 s. */
static void wait_fence_state(uint64_t fence, int want, const char *what) {
        for (int i = 0; i < 6000; i++) {
                if (kfdb_fence_is_done(s, fence) == want)
                        return;
                usleep(10000);
        }
        cr_assert_fail("%s", what);
}

/*
 * copy (SDMA) -> signal E1 -> wait E1 -> gate, saxpy (compute) -> signal E2
 * -> wait E2 -> copy (SDMA), all in one Submit. The gate kernel holds the
 * compute queue until this test writes its flag.
 *
 * The session's kernels run in a GPU context of its own; copies run in the
 * daemon's. The wait for E1 is resolved on the GPU: the SDMA queue writes a
 * word of the session's context when it is past the signal (a relay), and
 * the compute queue waits for that word — so the first copy's completion
 * needs no round trip through the daemon. The wait for E2 is resolved in
 * the daemon on purpose: an SDMA queue shared by every client must not poll
 * memory a client's kernel can write (it could hold the queue for everyone).
 * So while the gate holds, exactly the gate, saxpy and the E2 signal are on
 * the GPU, and the wait for E2 and the last copy are held in the daemon.
 */
Test(compute, copy_dispatch_copy_chain_is_ordered_on_the_gpu) {
        kfdb_code_object *sx = load_kernel(s, "saxpy"), *gate = load_kernel(s, "gate");
        const uint32_t n = 100000, block = 256, one = 1, max_spins = UINT32_MAX;
        const float alpha = 3.0f;
        float *src, *x, *y, *dst;
        uint32_t *flag, *gate_out;
        kfdb_buffer *bsrc = new_buffer(s, n * 4, 0, (void **) &src);
        kfdb_buffer *bx = new_buffer(s, n * 4, 0xAA, (void **) &x);
        kfdb_buffer *by = new_buffer(s, n * 4, 0, (void **) &y);
        kfdb_buffer *bdst = new_buffer(s, n * 4, 0xDD, (void **) &dst);
        kfdb_buffer *bflag = new_buffer(s, 4096, 0, (void **) &flag);
        kfdb_buffer *bgate = new_buffer(s, 4096, 0, (void **) &gate_out);
        kfdb_event *e1, *e2;
        kfdb_batch *b;
        kfdb_usage u;
        kfdb_daemon_status st;
        uint64_t fences[8];

        for (uint32_t i = 0; i < n; i++) {
                src[i] = (float) i * 0.5f;
                y[i] = (float) (i % 100);
        }
        cr_assert_eq(kfdb_event_create(s, false, &e1), 0);
        cr_assert_eq(kfdb_event_create(s, false, &e2), 0);
        kfdb_arg gargs[] = { kfdb_arg_buffer(bflag, 0), kfdb_arg_buffer(bgate, 0), kfdb_arg_value(&max_spins, 4) };
        kfdb_arg sargs[] = { kfdb_arg_value(&alpha, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0),
                             kfdb_arg_value(&n, 4) };
        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_copy(b, bx, 0, bsrc, 0, n * 4), 0);
        cr_assert_eq(kfdb_batch_signal_event(b, e1), 0);
        cr_assert_eq(kfdb_batch_wait_event(b, e1), 0);
        cr_assert_eq(kfdb_batch_dispatch(b, gate, "gate", 1, &one, &one, gargs, 3), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_dispatch(b, sx, "saxpy", 1, &n, &block, sargs, 4), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_signal_event(b, e2), 0);
        cr_assert_eq(kfdb_batch_wait_event(b, e2), 0);
        cr_assert_eq(kfdb_batch_copy(b, bdst, 0, by, 0, n * 4), 0);
        cr_assert_eq(kfdb_batch_submit(b, fences, NULL), 0, "%s", kfdb_session_last_error(s));

        /* The copy, its signal and the compute queue's wait for it retire; the gate holds. */
        wait_fence_state(fences[2], 1, "the first copy and the wait for it did not complete");
        usleep(100 * 1000);
        cr_assert_eq(kfdb_fence_is_done(s, fences[3]), 0, "the gate kernel did not hold");
        cr_assert_eq(kfdb_query(s, &u), 0);
        cr_assert_eq(kfdb_status(s, &st), 0);
        cr_assert_eq(u.jobs_in_flight, 5, "gate, saxpy, signal, wait, copy are unfinished");
        cr_assert_eq(st.jobs_in_flight, 3,
                     "gate, saxpy and the signal must be on the GPU, the wait for a compute signal held: %u of %u are",
                     st.jobs_in_flight, u.jobs_in_flight);
        /* The first copy ran, the last did not. */
        cr_assert_eq(x[n - 1], src[n - 1]);
        for (uint32_t i = 0; i < n; i += 997)
                cr_assert_eq(((uint32_t *) dst)[i], 0xDDDDDDDDu, "the last copy ran before the dispatch");

        __atomic_store_n(&flag[0], 1u, __ATOMIC_RELEASE);
        cr_assert_eq(kfdb_fence_wait(s, fences[7], DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        cr_assert_gt(gate_out[0], 0, "the gate polled its flag while the CPU looked");
        cr_assert_eq(gate_out[1], 1);
        for (uint32_t i = 0; i < n; i++) {
                float want = fmaf(alpha, (float) i * 0.5f, (float) (i % 100));
                cr_assert_eq(memcmp(&dst[i], &want, 4), 0, "dst[%u] = %g, expected %g", i, (double) dst[i],
                             (double) want);
        }
        kfdb_batch_free(b);
        kfdb_code_object_free(sx);
        kfdb_code_object_free(gate);
}

/*
 * A fill far over the scheduler's per-queue budget, then signal E -> wait E
 * -> dispatch. The signal must follow the fill's last piece into the SDMA
 * ring at once (it moves no data), so that the compute queue's wait is
 * resolved to a GPU-side WAIT_REG_MEM and the dispatch is submitted behind it
 * while the fill still runs: Status (jobs on the GPU, a job in pieces counted
 * once) equals Query (unfinished jobs) at some point before the fill ends. A
 * scheduler that held the signal back until the fill retired would keep the
 * wait and the dispatch on the CPU in the meantime.
 */
Test(compute, large_copy_does_not_hold_a_dispatch_on_the_cpu) {
        kfdb_code_object *co = load_kernel(s, "empty");
        const uint64_t big = 256ull << 20;
        const uint32_t one = 1;
        void *map;
        kfdb_buffer *bbig = new_buffer(s, big, 0, &map);
        kfdb_event *e;
        kfdb_batch *b;
        kfdb_usage u;
        kfdb_daemon_status st;
        uint64_t fences[4];
        bool observed = false;

        cr_assert_eq(kfdb_event_create(s, true, &e), 0);
        for (int attempt = 0; attempt < 3 && !observed; attempt++) {
                cr_assert_eq(kfdb_batch_new(s, &b), 0);
                cr_assert_eq(kfdb_batch_fill(b, bbig, 0, big, 0x5a5a5a5au + (uint32_t) attempt), 0);
                cr_assert_eq(kfdb_batch_signal_event(b, e), 0);
                cr_assert_eq(kfdb_batch_wait_event(b, e), 0);
                cr_assert_eq(kfdb_batch_dispatch(b, co, "empty", 1, &one, &one, NULL, 0), 0, "%s",
                             kfdb_session_last_error(s));
                cr_assert_eq(kfdb_batch_submit(b, fences, NULL), 0, "%s", kfdb_session_last_error(s));
                /* The fill goes to the GPU in 2 MiB pieces and the signal
                 * behind its last one: from then on, while the fill's last
                 * pieces still run, every unfinished job is on the GPU. */
                while (!observed) {
                        cr_assert_eq(kfdb_query(s, &u), 0, "%s", kfdb_session_last_error(s));
                        cr_assert_eq(kfdb_status(s, &st), 0, "%s", kfdb_session_last_error(s));
                        /* Only meaningful while the fill still runs. */
                        if (kfdb_fence_is_done(s, fences[0]) != 0)
                                break;
                        observed = st.jobs_in_flight == u.jobs_in_flight;
                }
                cr_assert_eq(kfdb_fence_wait(s, fences[3], DISPATCH_TIMEOUT_MS), 0, "%s",
                             kfdb_session_last_error(s));
                kfdb_batch_free(b);
        }
        cr_assert(observed, "the signal, wait and dispatch never were all on the GPU while the 256 MiB fill ran, 3 times");
        kfdb_code_object_free(co);
}

/* The reverse direction and explicit engines: fill (SDMA) -> dispatch ->
 * fill over the input (SDMA) that must not overtake the dispatch. */
Test(compute, explicit_engines_order_both_directions) {
        kfdb_code_object *co = load_kernel(s, "vector-add");
        const uint32_t n = 50000, block = 128;
        float *a, *bm, *c;
        kfdb_buffer *ba = new_buffer(s, n * 4, 0, (void **) &a);
        kfdb_buffer *bb = new_buffer(s, n * 4, 0, (void **) &bm);
        kfdb_buffer *bc = new_buffer(s, n * 4, 0, (void **) &c);
        kfdb_event *e1, *e2;
        kfdb_batch *b;
        uint64_t last;
        float one = 1.0f, two = 2.0f, nine = 9.0f;
        uint32_t one_bits, two_bits, nine_bits;

        memcpy(&one_bits, &one, 4);
        memcpy(&two_bits, &two, 4);
        memcpy(&nine_bits, &nine, 4);
        cr_assert_eq(kfdb_event_create(s, true, &e1), 0);
        cr_assert_eq(kfdb_event_create(s, true, &e2), 0);
        kfdb_arg args[] = { kfdb_arg_buffer(ba, 0), kfdb_arg_buffer(bb, 0), kfdb_arg_buffer(bc, 0),
                            kfdb_arg_value(&n, 4) };
        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_fill(b, ba, 0, n * 4, one_bits), 0);
        cr_assert_eq(kfdb_batch_fill(b, bb, 0, n * 4, two_bits), 0);
        cr_assert_eq(kfdb_batch_signal_event_on(b, e1, KFDB_ENGINE_SDMA), 0);
        cr_assert_eq(kfdb_batch_wait_event_on(b, e1, KFDB_ENGINE_COMPUTE), 0);
        cr_assert_eq(kfdb_batch_dispatch(b, co, "vector_add", 1, &n, &block, args, 4), 0);
        cr_assert_eq(kfdb_batch_signal_event_on(b, e2, KFDB_ENGINE_COMPUTE), 0);
        cr_assert_eq(kfdb_batch_wait_event_on(b, e2, KFDB_ENGINE_SDMA), 0);
        cr_assert_eq(kfdb_batch_fill(b, ba, 0, n * 4, nine_bits), 0);
        cr_assert_eq(kfdb_batch_submit(b, NULL, &last), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, last, DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        for (uint32_t i = 0; i < n; i++)
                cr_assert_eq(c[i], 3.0f, "c[%u] = %g: the dispatch saw a wrong input", i, (double) c[i]);
        cr_assert_eq(a[n - 1], 9.0f);
        kfdb_batch_free(b);
        kfdb_code_object_free(co);
}

/*
 * Interrupt moderation, shared mode: a fill that comes before a
 * wait for a compute signal on the same SDMA queue is reported when it
 * ends, not when the kernel the wait is for ends. fill F (SDMA) ; gate
 * (compute) -> signal E (compute) ; wait E (SDMA) -> fill: in shared mode the wait
 * is a POLL_REGMEM on the compute queue's fence, written in the same
 * scheduler pass as F.
 */
static void setup_shared(void) {
        const char *extra[] = { "--contexts=shared", NULL };
        int r;

        compute_require_kernels();
        test_daemon_start(&d, extra);
        /* The session page alone: what the daemon reports, and when. */
        setenv("KFDBROKER_FENCE_PAGE", "0", 1);
        r = kfdb_session_new(d.sock, "compute-shared", &s);
        unsetenv("KFDBROKER_FENCE_PAGE");
        cr_assert_eq(r, 0, "%s", strerror(-r));
}

Test(compute_shared, fill_before_a_gpu_wait_is_reported_when_it_ends, .init = setup_shared, .fini = teardown,
     .timeout = 600) {
        kfdb_code_object *gate = load_kernel(s, "gate");
        const uint32_t one = 1, max_spins = UINT32_MAX;
        uint32_t *flag, *gate_out, *data;
        kfdb_buffer *bflag = new_buffer(s, 4096, 0, (void **) &flag);
        kfdb_buffer *bgate = new_buffer(s, 4096, 0, (void **) &gate_out);
        kfdb_buffer *bdata = new_buffer(s, 4096, 0, (void **) &data);
        kfdb_event *e;
        kfdb_batch *b;
        uint64_t fences[5];
        int r;

        cr_assert_eq(kfdb_event_create(s, false, &e), 0);
        kfdb_arg gargs[] = { kfdb_arg_buffer(bflag, 0), kfdb_arg_buffer(bgate, 0), kfdb_arg_value(&max_spins, 4) };
        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_fill(b, bdata, 0, 4, 0x1234), 0);
        cr_assert_eq(kfdb_batch_dispatch(b, gate, "gate", 1, &one, &one, gargs, 3), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_signal_event_on(b, e, KFDB_ENGINE_COMPUTE), 0);
        cr_assert_eq(kfdb_batch_wait_event_on(b, e, KFDB_ENGINE_SDMA), 0);
        cr_assert_eq(kfdb_batch_fill(b, bdata, 4, 4, 0x5678), 0);
        cr_assert_eq(kfdb_batch_submit(b, fences, NULL), 0, "%s", kfdb_session_last_error(s));

        r = kfdb_fence_wait(s, fences[0], 3000);
        __atomic_store_n(&flag[0], 1u, __ATOMIC_RELEASE);
        cr_assert_eq(kfdb_fence_wait(s, fences[4], DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(data[0], 0x1234u);
        kfdb_batch_free(b);
        kfdb_code_object_free(gate);
        cr_assert_eq(r, 0, "the fill (fence %llu) ran at once but was not reported within 3 s while the gate held: %s",
                     (unsigned long long) fences[0], kfdb_session_last_error(s));
}
