// SPDX-License-Identifier: MIT
/*
 * Debian's prebuilt rocRAND and hipRAND (AMD's own gfx1030 kernels, not
 * ours) run unmodified through the broker (tests/integration/
 * test-rocm-libs.sh):
 *  - each of rocRAND's pseudo-random generators (XORWOW, MRG32k3a, MTGP32,
 *    Philox4x32-10) and Sobol32 fills 2^18 uniform floats: all in (0, 1],
 *    mean, variance and a 16-bin histogram as a uniform distribution's, and
 *    (but for XORWOW, whose seeding is slow on the simulator) the same seed
 *    again gives the same numbers;
 *  - Sobol32's raw first dimension, checked exactly on the CPU: its first
 *    2^m points are the 2^m multiples of 2^(32-m) in some order (the first
 *    dimension's direction numbers are v_k = 2^(32-k); Bratley and Fox,
 *    "Algorithm 659", ACM TOMS 14(1), 1988);
 *  - Philox's Poisson numbers (lambda 4): mean and variance 4; Philox's
 *    doubles (in (0, 1], mean 1/2) and log-normal numbers (the log's mean and
 *    sd); MRG32k3a's Poisson numbers of lambda 1000 (mean and variance);
 *  - hipRAND's Philox normal floats: mean 0, standard deviation 1, 68.3 %
 *    within one of the mean.
 * Prints "ok N - what" or "not ok N - what: why" per check (TAP) and exits 1
 * if any failed.
 */
#include <hip/hip_runtime.h>
#include <hiprand/hiprand.h>
#include <math.h>
#include <rocrand/rocrand.h>
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

#define ROCRAND_OK(expr, what)                                                                                         \
        do {                                                                                                           \
                rocrand_status s_ = (expr);                                                                            \
                char w_[48];                                                                                           \
                snprintf(w_, sizeof w_, "rocrand_status %d", (int) s_);                                                \
                check(s_ == ROCRAND_STATUS_SUCCESS, what, w_);                                                         \
        } while (0)

#define HIPRAND_OK(expr, what)                                                                                         \
        do {                                                                                                           \
                hiprandStatus_t s_ = (expr);                                                                           \
                char w_[48];                                                                                           \
                snprintf(w_, sizeof w_, "hiprandStatus_t %d", (int) s_);                                               \
                check(s_ == HIPRAND_STATUS_SUCCESS, what, w_);                                                         \
        } while (0)

enum { N = 1 << 18, BINS = 16 };

/* N uniform floats from a fresh generator of that type and seed. */
static void generate_uniform(rocrand_rng_type type, const char *name, unsigned long long seed, float *dev,
                             float *host) {
        char what[96];
        rocrand_generator g = NULL;
        snprintf(what, sizeof what, "rocrand_create_generator %s", name);
        ROCRAND_OK(rocrand_create_generator(&g, type), what);
        if (type != ROCRAND_RNG_QUASI_SOBOL32) {
                snprintf(what, sizeof what, "rocrand_set_seed %s", name);
                ROCRAND_OK(rocrand_set_seed(g, seed), what);
        }
        snprintf(what, sizeof what, "rocrand_generate_uniform %s", name);
        ROCRAND_OK(rocrand_generate_uniform(g, dev, N), what);
        HIP_OK(hipMemcpy(host, dev, N * sizeof(float), hipMemcpyDeviceToHost), "hipMemcpy the numbers back");
        ROCRAND_OK(rocrand_destroy_generator(g), "rocrand_destroy_generator");
}

static void uniform_checks(rocrand_rng_type type, const char *name, bool twice, float *dev, float *a, float *b) {
        char what[128], why[160];
        memset(a, 0, N * sizeof(float));
        generate_uniform(type, name, 20261206, dev, a);

        int outside = 0;
        unsigned bins[BINS] = {0};
        double sum = 0, sum2 = 0;
        for (int i = 0; i < N; i++) {
                if (!(a[i] > 0.0f && a[i] <= 1.0f))
                        outside++;
                else
                        bins[a[i] == 1.0f ? BINS - 1 : (int) (a[i] * BINS)]++;
                sum += a[i];
                sum2 += (double) a[i] * a[i];
        }
        double mean = sum / N, var = sum2 / N - mean * mean;
        snprintf(what, sizeof what, "%s: all %d numbers in (0, 1]", name, N);
        snprintf(why, sizeof why, "%d outside", outside);
        check(outside == 0, what, why);
        /* The mean of N uniform numbers has a standard deviation of
         * sqrt(1/12/N) = 0.00056; the variance's is about 0.00015. */
        snprintf(what, sizeof what, "%s: mean 1/2 and variance 1/12", name);
        snprintf(why, sizeof why, "mean %.5f, variance %.5f", mean, var);
        check(fabs(mean - 0.5) < 0.005 && fabs(var - 1.0 / 12) < 0.002, what, why);
        /* Each bin expects N/16 = 16384 with a standard deviation of 124. */
        int worst = 0;
        for (int k = 0; k < BINS; k++)
                if (abs((int) bins[k] - N / BINS) > abs((int) bins[worst] - N / BINS))
                        worst = k;
        snprintf(what, sizeof what, "%s: a flat %d-bin histogram", name, BINS);
        snprintf(why, sizeof why, "bin %d holds %u, expected %d", worst, bins[worst], N / BINS);
        check(abs((int) bins[worst] - N / BINS) < N / BINS / 20, what, why);

        if (!twice)
                return;
        generate_uniform(type, name, 20261206, dev, b);
        snprintf(what, sizeof what, "%s: the same seed gives the same numbers", name);
        check(memcmp(a, b, N * sizeof(float)) == 0, what, "they differ");
}

/* Sobol32's first dimension, raw: the first 2^18 points are the multiples of 2^14. */
static void sobol_exact(unsigned *dev, unsigned *host) {
        rocrand_generator g = NULL;
        ROCRAND_OK(rocrand_create_generator(&g, ROCRAND_RNG_QUASI_SOBOL32), "rocrand_create_generator SOBOL32");
        ROCRAND_OK(rocrand_generate(g, dev, N), "rocrand_generate SOBOL32");
        HIP_OK(hipMemcpy(host, dev, N * sizeof(unsigned), hipMemcpyDeviceToHost), "hipMemcpy the numbers back");
        ROCRAND_OK(rocrand_destroy_generator(g), "rocrand_destroy_generator");

        unsigned char *seen = (unsigned char *) calloc(N, 1);
        int bad = -1, twice = -1;
        for (int i = 0; i < N && bad < 0 && twice < 0; i++) {
                if (host[i] & ((1u << 14) - 1))
                        bad = i;
                else if (seen[host[i] >> 14]++)
                        twice = i;
        }
        char why[128];
        if (bad >= 0)
                snprintf(why, sizeof why, "point %d is 0x%08x, not a multiple of 2^14", bad, host[bad]);
        else if (twice >= 0)
                snprintf(why, sizeof why, "point %d (0x%08x) came before", twice, host[twice]);
        else
                snprintf(why, sizeof why, "all distinct");
        check(bad < 0 && twice < 0, "SOBOL32: the first 2^18 points are the 2^18 multiples of 2^14", why);
        free(seen);
}

static void poisson_checks(unsigned *dev, unsigned *host) {
        rocrand_generator g = NULL;
        ROCRAND_OK(rocrand_create_generator(&g, ROCRAND_RNG_PSEUDO_PHILOX4_32_10),
                   "rocrand_create_generator PHILOX4_32_10");
        ROCRAND_OK(rocrand_generate_poisson(g, dev, N, 4.0), "rocrand_generate_poisson lambda 4");
        HIP_OK(hipMemcpy(host, dev, N * sizeof(unsigned), hipMemcpyDeviceToHost), "hipMemcpy the numbers back");
        ROCRAND_OK(rocrand_destroy_generator(g), "rocrand_destroy_generator");
        double sum = 0, sum2 = 0;
        for (int i = 0; i < N; i++) {
                sum += host[i];
                sum2 += (double) host[i] * host[i];
        }
        double mean = sum / N, var = sum2 / N - mean * mean;
        char why[96];
        snprintf(why, sizeof why, "mean %.4f, variance %.4f", mean, var);
        /* Standard deviations: 0.004 for the mean, about 0.012 for the variance. */
        check(fabs(mean - 4) < 0.04 && fabs(var - 4) < 0.12, "Poisson numbers: mean and variance 4", why);
}

/* Philox's doubles and log-normal floats, MRG32k3a's Poisson numbers of a large lambda. */
static void more_distributions(void *dev, void *host) {
        double *dd = (double *) dev, *hd = (double *) host;
        float *hf = (float *) host;
        unsigned *hu = (unsigned *) host;
        rocrand_generator g = NULL;
        char why[128];

        ROCRAND_OK(rocrand_create_generator(&g, ROCRAND_RNG_PSEUDO_PHILOX4_32_10), "rocrand_create_generator PHILOX4_32_10");
        ROCRAND_OK(rocrand_generate_uniform_double(g, dd, N / 2), "rocrand_generate_uniform_double");
        HIP_OK(hipMemcpy(hd, dd, N / 2 * sizeof(double), hipMemcpyDeviceToHost), "hipMemcpy the numbers back");
        int outside = 0;
        double sum = 0, sum2 = 0;
        for (int i = 0; i < N / 2; i++) {
                outside += !(hd[i] > 0.0 && hd[i] <= 1.0);
                sum += hd[i];
        }
        snprintf(why, sizeof why, "%d outside (0, 1], mean %.5f", outside, sum / (N / 2));
        /* The mean's standard deviation: 0.0008. */
        check(outside == 0 && fabs(sum / (N / 2) - 0.5) < 0.006, "uniform doubles in (0, 1], mean 1/2", why);

        ROCRAND_OK(rocrand_generate_log_normal(g, (float *) dev, N, 0.0f, 0.5f), "rocrand_generate_log_normal");
        HIP_OK(hipMemcpy(hf, dev, N * sizeof(float), hipMemcpyDeviceToHost), "hipMemcpy the numbers back");
        int nonpositive = 0;
        sum = sum2 = 0;
        for (int i = 0; i < N; i++) {
                nonpositive += !(hf[i] > 0.0f);
                double x = log(hf[i] > 0.0f ? hf[i] : 1.0f);
                sum += x;
                sum2 += x * x;
        }
        double mean = sum / N, sd = sqrt(sum2 / N - mean * mean);
        snprintf(why, sizeof why, "%d not positive, log: mean %.4f, sd %.4f", nonpositive, mean, sd);
        /* Standard deviations: 0.001 for the log's mean, 0.0007 for its sd. */
        check(nonpositive == 0 && fabs(mean) < 0.01 && fabs(sd - 0.5) < 0.008,
              "log-normal numbers (0, 0.5): their log has mean 0 and sd 0.5", why);
        ROCRAND_OK(rocrand_destroy_generator(g), "rocrand_destroy_generator");

        ROCRAND_OK(rocrand_create_generator(&g, ROCRAND_RNG_PSEUDO_MRG32K3A), "rocrand_create_generator MRG32K3A");
        ROCRAND_OK(rocrand_generate_poisson(g, (unsigned *) dev, N, 1000.0), "rocrand_generate_poisson lambda 1000");
        HIP_OK(hipMemcpy(hu, dev, N * sizeof(unsigned), hipMemcpyDeviceToHost), "hipMemcpy the numbers back");
        ROCRAND_OK(rocrand_destroy_generator(g), "rocrand_destroy_generator");
        sum = sum2 = 0;
        for (int i = 0; i < N; i++) {
                sum += hu[i];
                sum2 += (double) hu[i] * hu[i];
        }
        mean = sum / N;
        double var = sum2 / N - mean * mean;
        snprintf(why, sizeof why, "mean %.3f, variance %.2f", mean, var);
        /* Standard deviations: 0.06 for the mean, 2.8 for the variance. */
        check(fabs(mean - 1000) < 0.6 && fabs(var - 1000) < 25, "Poisson numbers (lambda 1000): mean and variance 1000",
              why);
}

static void hiprand_normal_checks(float *dev, float *host) {
        hiprandGenerator_t g = NULL;
        HIPRAND_OK(hiprandCreateGenerator(&g, HIPRAND_RNG_PSEUDO_PHILOX4_32_10), "hiprandCreateGenerator PHILOX");
        HIPRAND_OK(hiprandSetPseudoRandomGeneratorSeed(g, 42), "hiprandSetPseudoRandomGeneratorSeed");
        HIPRAND_OK(hiprandGenerateNormal(g, dev, N, 0.0f, 1.0f), "hiprandGenerateNormal");
        HIP_OK(hipMemcpy(host, dev, N * sizeof(float), hipMemcpyDeviceToHost), "hipMemcpy the numbers back");
        HIPRAND_OK(hiprandDestroyGenerator(g), "hiprandDestroyGenerator");
        double sum = 0, sum2 = 0;
        int within = 0, finite = 0;
        for (int i = 0; i < N; i++) {
                finite += isfinite(host[i]) != 0;
                within += fabsf(host[i]) < 1.0f;
                sum += host[i];
                sum2 += (double) host[i] * host[i];
        }
        double mean = sum / N, sd = sqrt(sum2 / N - mean * mean), frac = (double) within / N;
        char why[128];
        snprintf(why, sizeof why, "%d finite, mean %.4f, sd %.4f, %.4f within one", finite, mean, sd, frac);
        /* Standard deviations: 0.002 for the mean, 0.0014 for the sd, 0.0009 for the fraction. */
        check(finite == N && fabs(mean) < 0.02 && fabs(sd - 1) < 0.015 && fabs(frac - 0.6827) < 0.009,
              "hipRAND normal numbers: mean 0, sd 1, 68.3 % within one", why);
}

int main(void) {
        float *dev = NULL, *a = (float *) malloc(N * sizeof(float)), *b = (float *) malloc(N * sizeof(float));
        HIP_OK(hipMalloc(&dev, N * sizeof(float)), "hipMalloc");

        const struct {
                rocrand_rng_type type;
                const char *name;
                bool twice;
        } generators[] = {
                /* XORWOW's seeding skips each thread's state ahead, half a
                 * minute on the simulator: once only. */
                {ROCRAND_RNG_PSEUDO_XORWOW, "XORWOW", false},
                {ROCRAND_RNG_PSEUDO_MRG32K3A, "MRG32K3A", true},
                {ROCRAND_RNG_PSEUDO_MTGP32, "MTGP32", true},
                {ROCRAND_RNG_PSEUDO_PHILOX4_32_10, "PHILOX4_32_10", true},
                {ROCRAND_RNG_QUASI_SOBOL32, "SOBOL32", true},
        };
        /* XORWOW's seeding is half a minute of the interpreter's time (more
         * on a busy machine): only when asked for (HIP_RAND_XORWOW=1). */
        const char *xorwow = getenv("HIP_RAND_XORWOW");
        for (const auto &g : generators)
                if (g.type != ROCRAND_RNG_PSEUDO_XORWOW || (xorwow && strcmp(xorwow, "1") == 0))
                        uniform_checks(g.type, g.name, g.twice, dev, a, b);
        sobol_exact((unsigned *) dev, (unsigned *) a);
        poisson_checks((unsigned *) dev, (unsigned *) a);
        more_distributions(dev, a);
        hiprand_normal_checks(dev, a);

        HIP_OK(hipFree(dev), "hipFree");
        free(a);
        free(b);
        printf("1..%d\n", n_checks);
        printf("%s: %d of %d checks failed\n", n_failed ? "FAIL" : "PASS", n_failed, n_checks);
        return n_failed ? 1 : 0;
}
