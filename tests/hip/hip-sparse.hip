// SPDX-License-Identifier: MIT
/*
 * Debian's prebuilt rocSPARSE and hipSPARSE (AMD's own gfx1030 kernels, not
 * ours) run unmodified through the broker (tests/integration/
 * test-rocm-libs.sh): sparse matrix-vector products y = alpha*A*x + beta*y
 * on a CSR matrix with empty rows, short rows and one long row, each
 * compared with the same product computed on the CPU in double precision.
 * rocSPARSE's csrmv without analysis (its row-per-wavefront kernel) and with
 * csrmv_analysis (its adaptive kernel, which splits the long row), in single
 * and double precision; hipSPARSE's legacy csrmv and its generic SpMV, both
 * of which call into rocSPARSE. Then rocSPARSE's csrmm (the same matrix
 * times 8 dense columns), its csr2csc (rocPRIM's radix
 * sort) against the CPU's transpose, exactly, and its triangular solve csrsv
 * (whose wavefronts wait through memory for the rows they depend on) against
 * forward substitution. Prints "ok N - what" or "not ok N - what:
 * why" per check (TAP) and exits 1 if any failed.
 */
#include <hip/hip_runtime.h>
#include <hipsparse/hipsparse.h>
#include <math.h>
#include <rocsparse/rocsparse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_checks, n_failed;

static void check(bool ok, const char *what, const char *why) {
        n_checks++;
        if (ok)
                printf("ok %d - %s\n", n_checks, what);
        else {
                n_failed++;
                printf("not ok %d - %s: %s\n", n_checks, what, why);
        }
        fflush(stdout);
}

#define HIP_OK(expr, what)                                                                                             \
        do {                                                                                                           \
                hipError_t e_ = (expr);                                                                                \
                check(e_ == hipSuccess, what, hipGetErrorString(e_));                                                  \
        } while (0)

#define ROC_OK(expr, what)                                                                                             \
        do {                                                                                                           \
                rocsparse_status s_ = (expr);                                                                          \
                char w_[48];                                                                                           \
                snprintf(w_, sizeof w_, "rocsparse_status %d", (int) s_);                                              \
                check(s_ == rocsparse_status_success, what, w_);                                                       \
        } while (0)

#define HIPSPARSE_OK(expr, what)                                                                                       \
        do {                                                                                                           \
                hipsparseStatus_t s_ = (expr);                                                                         \
                char w_[48];                                                                                           \
                snprintf(w_, sizeof w_, "hipsparseStatus_t %d", (int) s_);                                             \
                check(s_ == HIPSPARSE_STATUS_SUCCESS, what, w_);                                                       \
        } while (0)

/* A deterministic pseudo-random sequence for the matrix (xorshift32). */
static unsigned rng_state = 12345;
static unsigned next_rand(void) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 17;
        rng_state ^= rng_state << 5;
        return rng_state;
}

struct csr {
        int m, n, nnz;
        int *row_ptr, *col;
        double *val;
};

/*
 * An m x n matrix: every 7th row empty, the others 1..24 entries in
 * increasing columns, and row 3 holding every other column (a row far
 * longer than the rest, which the adaptive kernel splits between
 * workgroups).
 */
static struct csr make_matrix(int m, int n) {
        struct csr a = {m, n, 0, (int *) calloc(m + 1, sizeof(int)), NULL, NULL};
        int cap = m * 24 + n;
        a.col = (int *) malloc(cap * sizeof(int));
        a.val = (double *) malloc(cap * sizeof(double));
        for (int r = 0; r < m; r++) {
                a.row_ptr[r] = a.nnz;
                if (r % 7 == 6)
                        continue;
                int step = r == 3 ? 2 : 1 + (int) (next_rand() % (2 * n / 24));
                int count = r == 3 ? n / 2 : 1 + (int) (next_rand() % 24);
                for (int k = 0, c = (int) (next_rand() % 8); k < count && c < n; k++, c += step) {
                        a.col[a.nnz] = c;
                        a.val[a.nnz] = (double) ((int) (next_rand() % 2001) - 1000) / 256.0;
                        a.nnz++;
                }
        }
        a.row_ptr[m] = a.nnz;
        return a;
}

static void cpu_spmv(const struct csr *a, double alpha, const double *x, double beta, double *y) {
        for (int r = 0; r < a->m; r++) {
                double sum = 0;
                for (int k = a->row_ptr[r]; k < a->row_ptr[r + 1]; k++)
                        sum += a->val[k] * x[a->col[k]];
                y[r] = alpha * sum + beta * y[r];
        }
}

/* Compares a GPU result with the CPU's, relative to the row's magnitude. */
template <typename T>
static void compare(const char *what, const T *got, const double *want, int m, double tolerance) {
        int bad = 0, first = -1;
        for (int r = 0; r < m; r++)
                if (!(fabs((double) got[r] - want[r]) <= tolerance * (1 + fabs(want[r])))) {
                        if (first < 0)
                                first = r;
                        bad++;
                }
        char why[160];
        if (bad)
                snprintf(why, sizeof why, "%d of %d rows differ, first row %d: %g, expected %g", bad, m, first,
                         (double) got[first], want[first]);
        else
                snprintf(why, sizeof why, "all %d rows agree", m);
        check(bad == 0, what, why);
}

/* rocSPARSE's csrmv in precision T, without and with analysis. */
template <typename T>
static void rocsparse_csrmv_checks(rocsparse_handle h, const struct csr *a, const double *x, const double *y0,
                                   const double *want, double tolerance, const char *precision);

template <typename T>
static rocsparse_status csrmv_analysis(rocsparse_handle h, const struct csr *a, rocsparse_mat_descr d,
                                       const T *val, const int *row_ptr, const int *col, rocsparse_mat_info info);
template <>
rocsparse_status csrmv_analysis<float>(rocsparse_handle h, const struct csr *a, rocsparse_mat_descr d,
                                       const float *val, const int *row_ptr, const int *col,
                                       rocsparse_mat_info info) {
        return rocsparse_scsrmv_analysis(h, rocsparse_operation_none, a->m, a->n, a->nnz, d, val, row_ptr, col, info);
}
template <>
rocsparse_status csrmv_analysis<double>(rocsparse_handle h, const struct csr *a, rocsparse_mat_descr d,
                                        const double *val, const int *row_ptr, const int *col,
                                        rocsparse_mat_info info) {
        return rocsparse_dcsrmv_analysis(h, rocsparse_operation_none, a->m, a->n, a->nnz, d, val, row_ptr, col, info);
}

template <typename T>
static rocsparse_status csrmv(rocsparse_handle h, const struct csr *a, T alpha, rocsparse_mat_descr d, const T *val,
                              const int *row_ptr, const int *col, rocsparse_mat_info info, const T *x, T beta, T *y);
template <>
rocsparse_status csrmv<float>(rocsparse_handle h, const struct csr *a, float alpha, rocsparse_mat_descr d,
                              const float *val, const int *row_ptr, const int *col, rocsparse_mat_info info,
                              const float *x, float beta, float *y) {
        return rocsparse_scsrmv(h, rocsparse_operation_none, a->m, a->n, a->nnz, &alpha, d, val, row_ptr, col, info,
                                x, &beta, y);
}
template <>
rocsparse_status csrmv<double>(rocsparse_handle h, const struct csr *a, double alpha, rocsparse_mat_descr d,
                               const double *val, const int *row_ptr, const int *col, rocsparse_mat_info info,
                               const double *x, double beta, double *y) {
        return rocsparse_dcsrmv(h, rocsparse_operation_none, a->m, a->n, a->nnz, &alpha, d, val, row_ptr, col, info,
                                x, &beta, y);
}

template <typename T>
static T *to_device(const double *src, int n) {
        T *host = (T *) malloc(n * sizeof(T)), *dev = NULL;
        for (int i = 0; i < n; i++)
                host[i] = (T) src[i];
        HIP_OK(hipMalloc(&dev, n * sizeof(T)), "hipMalloc");
        HIP_OK(hipMemcpy(dev, host, n * sizeof(T), hipMemcpyHostToDevice), "hipMemcpy to the device");
        free(host);
        return dev;
}

template <typename T>
static void rocsparse_csrmv_checks(rocsparse_handle h, const struct csr *a, const double *x, const double *y0,
                                   const double *want, double tolerance, const char *precision) {
        char what[128];
        int *drow = NULL, *dcol = NULL;
        HIP_OK(hipMalloc(&drow, (a->m + 1) * sizeof(int)), "hipMalloc row_ptr");
        HIP_OK(hipMalloc(&dcol, a->nnz * sizeof(int)), "hipMalloc col_ind");
        HIP_OK(hipMemcpy(drow, a->row_ptr, (a->m + 1) * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy row_ptr");
        HIP_OK(hipMemcpy(dcol, a->col, a->nnz * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy col_ind");
        T *dval = to_device<T>(a->val, a->nnz), *dx = to_device<T>(x, a->n);
        T *hy = (T *) malloc(a->m * sizeof(T));
        rocsparse_mat_descr d = NULL;
        rocsparse_mat_info info = NULL;
        ROC_OK(rocsparse_create_mat_descr(&d), "rocsparse_create_mat_descr");
        ROC_OK(rocsparse_create_mat_info(&info), "rocsparse_create_mat_info");

        for (int adaptive = 0; adaptive < 2; adaptive++) {
                T *dy = to_device<T>(y0, a->m);
                if (adaptive) {
                        snprintf(what, sizeof what, "rocsparse_%scsrmv_analysis", precision);
                        ROC_OK(csrmv_analysis<T>(h, a, d, dval, drow, dcol, info), what);
                }
                snprintf(what, sizeof what, "rocsparse_%scsrmv%s", precision, adaptive ? " (adaptive)" : "");
                ROC_OK(csrmv<T>(h, a, (T) 1.5, d, dval, drow, dcol, adaptive ? info : NULL, dx, (T) -0.5, dy), what);
                HIP_OK(hipMemcpy(hy, dy, a->m * sizeof(T), hipMemcpyDeviceToHost), "hipMemcpy y back");
                snprintf(what, sizeof what, "rocsparse_%scsrmv%s equals the CPU's SpMV", precision,
                         adaptive ? " (adaptive)" : "");
                compare(what, hy, want, a->m, tolerance);
                HIP_OK(hipFree(dy), "hipFree y");
        }
        ROC_OK(rocsparse_destroy_mat_info(info), "rocsparse_destroy_mat_info");
        ROC_OK(rocsparse_destroy_mat_descr(d), "rocsparse_destroy_mat_descr");
        HIP_OK(hipFree(dval), "hipFree val");
        HIP_OK(hipFree(dx), "hipFree x");
        HIP_OK(hipFree(drow), "hipFree row_ptr");
        HIP_OK(hipFree(dcol), "hipFree col_ind");
        free(hy);
}

/* rocSPARSE's csrmm: C = 1.5*A*B - 0.5*C for a dense B of 8 columns (column-major). */
static void csrmm_checks(rocsparse_handle h, const struct csr *a) {
        const int k = 8;
        double *b = (double *) malloc((size_t) a->n * k * sizeof(double)),
               *c0 = (double *) malloc((size_t) a->m * k * sizeof(double)),
               *want = (double *) malloc((size_t) a->m * k * sizeof(double));
        for (int i = 0; i < a->n * k; i++)
                b[i] = (double) ((int) (next_rand() % 129) - 64) / 32.0;
        for (int i = 0; i < a->m * k; i++)
                c0[i] = want[i] = (double) (i % 13) - 6.0;
        for (int j = 0; j < k; j++)
                cpu_spmv(a, 1.5, b + (size_t) j * a->n, -0.5, want + (size_t) j * a->m);

        int *drow = NULL, *dcol = NULL;
        HIP_OK(hipMalloc(&drow, (a->m + 1) * sizeof(int)), "hipMalloc row_ptr");
        HIP_OK(hipMalloc(&dcol, a->nnz * sizeof(int)), "hipMalloc col_ind");
        HIP_OK(hipMemcpy(drow, a->row_ptr, (a->m + 1) * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy row_ptr");
        HIP_OK(hipMemcpy(dcol, a->col, a->nnz * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy col_ind");
        float *dval = to_device<float>(a->val, a->nnz), *db = to_device<float>(b, a->n * k),
              *dc = to_device<float>(c0, a->m * k), *hc = (float *) malloc((size_t) a->m * k * sizeof(float));
        rocsparse_mat_descr d = NULL;
        float alpha = 1.5f, beta = -0.5f;
        ROC_OK(rocsparse_create_mat_descr(&d), "rocsparse_create_mat_descr");
        ROC_OK(rocsparse_scsrmm(h, rocsparse_operation_none, rocsparse_operation_none, a->m, k, a->n, a->nnz, &alpha,
                                d, dval, drow, dcol, db, a->n, &beta, dc, a->m),
               "rocsparse_scsrmm");
        HIP_OK(hipMemcpy(hc, dc, (size_t) a->m * k * sizeof(float), hipMemcpyDeviceToHost), "hipMemcpy C back");
        compare("rocsparse_scsrmm equals the CPU's product", hc, want, a->m * k, 1e-4);
        ROC_OK(rocsparse_destroy_mat_descr(d), "rocsparse_destroy_mat_descr");
        HIP_OK(hipFree(dval), "hipFree val");
        HIP_OK(hipFree(db), "hipFree B");
        HIP_OK(hipFree(dc), "hipFree C");
        HIP_OK(hipFree(drow), "hipFree row_ptr");
        HIP_OK(hipFree(dcol), "hipFree col_ind");
        free(b);
        free(c0);
        free(want);
        free(hc);
}

/* rocSPARSE's csr2csc: the transpose, compared exactly with the CPU's. */
static void csr2csc_checks(rocsparse_handle h, const struct csr *a) {
        int *drow = NULL, *dcol = NULL, *dcsc_row = NULL, *dcsc_ptr = NULL;
        float *dcsc_val = NULL, *dval = to_device<float>(a->val, a->nnz);
        void *buffer = NULL;
        size_t size = 0;
        HIP_OK(hipMalloc(&drow, (a->m + 1) * sizeof(int)), "hipMalloc row_ptr");
        HIP_OK(hipMalloc(&dcol, a->nnz * sizeof(int)), "hipMalloc col_ind");
        HIP_OK(hipMalloc(&dcsc_ptr, (a->n + 1) * sizeof(int)), "hipMalloc csc_col_ptr");
        HIP_OK(hipMalloc(&dcsc_row, a->nnz * sizeof(int)), "hipMalloc csc_row_ind");
        HIP_OK(hipMalloc(&dcsc_val, a->nnz * sizeof(float)), "hipMalloc csc_val");
        HIP_OK(hipMemcpy(drow, a->row_ptr, (a->m + 1) * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy row_ptr");
        HIP_OK(hipMemcpy(dcol, a->col, a->nnz * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy col_ind");
        ROC_OK(rocsparse_csr2csc_buffer_size(h, a->m, a->n, a->nnz, drow, dcol, rocsparse_action_numeric, &size),
               "rocsparse_csr2csc_buffer_size");
        HIP_OK(hipMalloc(&buffer, size ? size : 4), "hipMalloc the csr2csc buffer");
        ROC_OK(rocsparse_scsr2csc(h, a->m, a->n, a->nnz, dval, drow, dcol, dcsc_val, dcsc_row, dcsc_ptr,
                                  rocsparse_action_numeric, rocsparse_index_base_zero, buffer),
               "rocsparse_scsr2csc");

        /* The CPU's transpose: columns in order, rows increasing within each. */
        int *ptr = (int *) calloc(a->n + 1, sizeof(int)), *row = (int *) malloc(a->nnz * sizeof(int));
        float *val = (float *) malloc(a->nnz * sizeof(float));
        for (int k = 0; k < a->nnz; k++)
                ptr[a->col[k] + 1]++;
        for (int c = 0; c < a->n; c++)
                ptr[c + 1] += ptr[c];
        int *next = (int *) malloc(a->n * sizeof(int));
        memcpy(next, ptr, a->n * sizeof(int));
        for (int r = 0; r < a->m; r++)
                for (int k = a->row_ptr[r]; k < a->row_ptr[r + 1]; k++) {
                        row[next[a->col[k]]] = r;
                        val[next[a->col[k]]++] = (float) a->val[k];
                }
        int *gptr = (int *) malloc((a->n + 1) * sizeof(int)), *grow = (int *) malloc(a->nnz * sizeof(int));
        float *gval = (float *) malloc(a->nnz * sizeof(float));
        HIP_OK(hipMemcpy(gptr, dcsc_ptr, (a->n + 1) * sizeof(int), hipMemcpyDeviceToHost), "hipMemcpy csc_col_ptr back");
        HIP_OK(hipMemcpy(grow, dcsc_row, a->nnz * sizeof(int), hipMemcpyDeviceToHost), "hipMemcpy csc_row_ind back");
        HIP_OK(hipMemcpy(gval, dcsc_val, a->nnz * sizeof(float), hipMemcpyDeviceToHost), "hipMemcpy csc_val back");
        int bad_ptr = 0, bad = 0;
        for (int c = 0; c <= a->n; c++)
                bad_ptr += gptr[c] != ptr[c];
        for (int k = 0; k < a->nnz; k++)
                bad += grow[k] != row[k] || gval[k] != val[k];
        char why[128];
        snprintf(why, sizeof why, "%d of %d column pointers and %d of %d entries differ", bad_ptr, a->n + 1, bad,
                 a->nnz);
        check(bad_ptr == 0 && bad == 0, "rocsparse_scsr2csc equals the CPU's transpose", why);
        free(ptr);
        free(row);
        free(val);
        free(next);
        free(gptr);
        free(grow);
        free(gval);
        HIP_OK(hipFree(buffer), "hipFree the csr2csc buffer");
        HIP_OK(hipFree(dval), "hipFree val");
        HIP_OK(hipFree(drow), "hipFree row_ptr");
        HIP_OK(hipFree(dcol), "hipFree col_ind");
        HIP_OK(hipFree(dcsc_ptr), "hipFree csc_col_ptr");
        HIP_OK(hipFree(dcsc_row), "hipFree csc_row_ind");
        HIP_OK(hipFree(dcsc_val), "hipFree csc_val");
}

/*
 * rocSPARSE's csrsv: solves L*y = alpha*x for a lower triangular L whose rows
 * depend on earlier rows (the solve's wavefronts wait for each other's
 * results through memory), against the CPU's forward substitution.
 */
static void csrsv_checks(rocsparse_handle h, int n) {
        /* Row r: a few entries left of the diagonal, some of them far left, and 4 on it. */
        struct csr l = {n, n, 0, (int *) calloc(n + 1, sizeof(int)), (int *) malloc(n * 9 * sizeof(int)),
                        (double *) malloc(n * 9 * sizeof(double))};
        for (int r = 0; r < n; r++) {
                l.row_ptr[r] = l.nnz;
                int count = (int) (next_rand() % 9);
                for (int c = r - count * (1 + r % 5); c < r; c += 1 + r % 5)
                        if (c >= 0) {
                                l.col[l.nnz] = c;
                                l.val[l.nnz++] = (double) ((int) (next_rand() % 129) - 64) / 256.0;
                        }
                l.col[l.nnz] = r;
                l.val[l.nnz++] = 4.0;
        }
        l.row_ptr[n] = l.nnz;
        double *x = (double *) malloc(n * sizeof(double)), *want = (double *) malloc(n * sizeof(double));
        for (int i = 0; i < n; i++)
                x[i] = (double) ((int) (next_rand() % 257) - 128) / 16.0;
        for (int r = 0; r < n; r++) {
                double sum = 2.0 * x[r];
                for (int k = l.row_ptr[r]; k < l.row_ptr[r + 1] - 1; k++)
                        sum -= l.val[k] * want[l.col[k]];
                want[r] = sum / l.val[l.row_ptr[r + 1] - 1];
        }

        int *drow = NULL, *dcol = NULL;
        HIP_OK(hipMalloc(&drow, (n + 1) * sizeof(int)), "hipMalloc row_ptr");
        HIP_OK(hipMalloc(&dcol, l.nnz * sizeof(int)), "hipMalloc col_ind");
        HIP_OK(hipMemcpy(drow, l.row_ptr, (n + 1) * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy row_ptr");
        HIP_OK(hipMemcpy(dcol, l.col, l.nnz * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy col_ind");
        float *dval = to_device<float>(l.val, l.nnz), *dx = to_device<float>(x, n), *dy = NULL;
        HIP_OK(hipMalloc(&dy, n * sizeof(float)), "hipMalloc y");
        rocsparse_mat_descr d = NULL;
        rocsparse_mat_info info = NULL;
        ROC_OK(rocsparse_create_mat_descr(&d), "rocsparse_create_mat_descr");
        ROC_OK(rocsparse_set_mat_fill_mode(d, rocsparse_fill_mode_lower), "rocsparse_set_mat_fill_mode lower");
        ROC_OK(rocsparse_create_mat_info(&info), "rocsparse_create_mat_info");
        size_t size = 0;
        void *buffer = NULL;
        ROC_OK(rocsparse_scsrsv_buffer_size(h, rocsparse_operation_none, n, l.nnz, d, dval, drow, dcol, info, &size),
               "rocsparse_scsrsv_buffer_size");
        HIP_OK(hipMalloc(&buffer, size ? size : 4), "hipMalloc the csrsv buffer");
        ROC_OK(rocsparse_scsrsv_analysis(h, rocsparse_operation_none, n, l.nnz, d, dval, drow, dcol, info,
                                         rocsparse_analysis_policy_reuse, rocsparse_solve_policy_auto, buffer),
               "rocsparse_scsrsv_analysis");
        float alpha = 2.0f;
        ROC_OK(rocsparse_scsrsv_solve(h, rocsparse_operation_none, n, l.nnz, &alpha, d, dval, drow, dcol, info, dx, dy,
                                      rocsparse_solve_policy_auto, buffer),
               "rocsparse_scsrsv_solve");
        int pivot = -2;
        rocsparse_status s = rocsparse_csrsv_zero_pivot(h, d, info, &pivot);
        char why[96];
        snprintf(why, sizeof why, "status %d, position %d", (int) s, pivot);
        check(s == rocsparse_status_success && pivot == -1, "rocsparse_csrsv_zero_pivot finds none", why);
        float *hy = (float *) malloc(n * sizeof(float));
        HIP_OK(hipMemcpy(hy, dy, n * sizeof(float), hipMemcpyDeviceToHost), "hipMemcpy y back");
        printf("# lower triangular %d x %d, %d non-zeros\n", n, n, l.nnz);
        compare("rocsparse_scsrsv_solve equals the CPU's forward substitution", hy, want, n, 1e-4);

        ROC_OK(rocsparse_csrsv_clear(h, d, info), "rocsparse_csrsv_clear");
        ROC_OK(rocsparse_destroy_mat_info(info), "rocsparse_destroy_mat_info");
        ROC_OK(rocsparse_destroy_mat_descr(d), "rocsparse_destroy_mat_descr");
        HIP_OK(hipFree(buffer), "hipFree the csrsv buffer");
        HIP_OK(hipFree(dval), "hipFree val");
        HIP_OK(hipFree(dx), "hipFree x");
        HIP_OK(hipFree(dy), "hipFree y");
        HIP_OK(hipFree(drow), "hipFree row_ptr");
        HIP_OK(hipFree(dcol), "hipFree col_ind");
        free(hy);
        free(x);
        free(want);
        free(l.row_ptr);
        free(l.col);
        free(l.val);
}

static void hipsparse_checks(const struct csr *a, const double *x, const double *y0, const double *want) {
        hipsparseHandle_t h = NULL;
        hipsparseMatDescr_t d = NULL;
        HIPSPARSE_OK(hipsparseCreate(&h), "hipsparseCreate");
        HIPSPARSE_OK(hipsparseCreateMatDescr(&d), "hipsparseCreateMatDescr");
        int *drow = NULL, *dcol = NULL;
        HIP_OK(hipMalloc(&drow, (a->m + 1) * sizeof(int)), "hipMalloc row_ptr");
        HIP_OK(hipMalloc(&dcol, a->nnz * sizeof(int)), "hipMalloc col_ind");
        HIP_OK(hipMemcpy(drow, a->row_ptr, (a->m + 1) * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy row_ptr");
        HIP_OK(hipMemcpy(dcol, a->col, a->nnz * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy col_ind");
        float *dval = to_device<float>(a->val, a->nnz), *dx = to_device<float>(x, a->n);
        float *dy = to_device<float>(y0, a->m), *hy = (float *) malloc(a->m * sizeof(float));
        float alpha = 1.5f, beta = -0.5f;

        HIPSPARSE_OK(hipsparseScsrmv(h, HIPSPARSE_OPERATION_NON_TRANSPOSE, a->m, a->n, a->nnz, &alpha, d, dval, drow,
                                     dcol, dx, &beta, dy),
                     "hipsparseScsrmv");
        HIP_OK(hipMemcpy(hy, dy, a->m * sizeof(float), hipMemcpyDeviceToHost), "hipMemcpy y back");
        compare("hipsparseScsrmv equals the CPU's SpMV", hy, want, a->m, 1e-4);

        /* The generic API, with its external buffer. */
        HIP_OK(hipFree(dy), "hipFree y");
        dy = to_device<float>(y0, a->m);
        hipsparseSpMatDescr_t ma = NULL;
        hipsparseDnVecDescr_t vx = NULL, vy = NULL;
        size_t size = 0;
        void *buffer = NULL;
        HIPSPARSE_OK(hipsparseCreateCsr(&ma, a->m, a->n, a->nnz, drow, dcol, dval, HIPSPARSE_INDEX_32I,
                                        HIPSPARSE_INDEX_32I, HIPSPARSE_INDEX_BASE_ZERO, HIP_R_32F),
                     "hipsparseCreateCsr");
        HIPSPARSE_OK(hipsparseCreateDnVec(&vx, a->n, dx, HIP_R_32F), "hipsparseCreateDnVec x");
        HIPSPARSE_OK(hipsparseCreateDnVec(&vy, a->m, dy, HIP_R_32F), "hipsparseCreateDnVec y");
        HIPSPARSE_OK(hipsparseSpMV_bufferSize(h, HIPSPARSE_OPERATION_NON_TRANSPOSE, &alpha, ma, vx, &beta, vy,
                                              HIP_R_32F, HIPSPARSE_SPMV_ALG_DEFAULT, &size),
                     "hipsparseSpMV_bufferSize");
        HIP_OK(hipMalloc(&buffer, size ? size : 4), "hipMalloc the SpMV buffer");
        HIPSPARSE_OK(hipsparseSpMV(h, HIPSPARSE_OPERATION_NON_TRANSPOSE, &alpha, ma, vx, &beta, vy, HIP_R_32F,
                                   HIPSPARSE_SPMV_ALG_DEFAULT, buffer),
                     "hipsparseSpMV");
        HIP_OK(hipMemcpy(hy, dy, a->m * sizeof(float), hipMemcpyDeviceToHost), "hipMemcpy y back");
        compare("hipsparseSpMV equals the CPU's SpMV", hy, want, a->m, 1e-4);

        HIPSPARSE_OK(hipsparseDestroyDnVec(vx), "hipsparseDestroyDnVec x");
        HIPSPARSE_OK(hipsparseDestroyDnVec(vy), "hipsparseDestroyDnVec y");
        HIPSPARSE_OK(hipsparseDestroySpMat(ma), "hipsparseDestroySpMat");
        HIPSPARSE_OK(hipsparseDestroyMatDescr(d), "hipsparseDestroyMatDescr");
        HIPSPARSE_OK(hipsparseDestroy(h), "hipsparseDestroy");
        HIP_OK(hipFree(buffer), "hipFree the SpMV buffer");
        HIP_OK(hipFree(dval), "hipFree val");
        HIP_OK(hipFree(dx), "hipFree x");
        HIP_OK(hipFree(dy), "hipFree y");
        HIP_OK(hipFree(drow), "hipFree row_ptr");
        HIP_OK(hipFree(dcol), "hipFree col_ind");
        free(hy);
}

int main(void) {
        const int m = 3000, n = 2048;
        struct csr a = make_matrix(m, n);
        double *x = (double *) malloc(n * sizeof(double)), *y0 = (double *) malloc(m * sizeof(double));
        double *want = (double *) malloc(m * sizeof(double));
        for (int i = 0; i < n; i++)
                x[i] = (double) ((int) (next_rand() % 513) - 256) / 64.0;
        for (int r = 0; r < m; r++)
                y0[r] = want[r] = (double) (r % 17) - 8.0;
        cpu_spmv(&a, 1.5, x, -0.5, want);
        printf("# CSR %d x %d, %d non-zeros, longest row %d\n", m, n, a.nnz, a.row_ptr[4] - a.row_ptr[3]);

        rocsparse_handle h = NULL;
        ROC_OK(rocsparse_create_handle(&h), "rocsparse_create_handle");
        rocsparse_csrmv_checks<float>(h, &a, x, y0, want, 1e-4, "s");
        rocsparse_csrmv_checks<double>(h, &a, x, y0, want, 1e-12, "d");
        csrmm_checks(h, &a);
        csr2csc_checks(h, &a);
        csrsv_checks(h, 4000);
        ROC_OK(rocsparse_destroy_handle(h), "rocsparse_destroy_handle");
        hipsparse_checks(&a, x, y0, want);

        free(a.row_ptr);
        free(a.col);
        free(a.val);
        free(x);
        free(y0);
        free(want);
        printf("1..%d\n", n_checks);
        printf("%s: %d of %d checks failed\n", n_failed ? "FAIL" : "PASS", n_failed, n_checks);
        return n_failed ? 1 : 0;
}
