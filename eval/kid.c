// defines: kid_subset_size, kid_score
// KID: unbiased polynomial-kernel MMD^2 over random subsets (eval/kid.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/inception.h"  // defines: eval_rand_seed, eval_rand_u
#include "eval/kid.h"

#include <cblas.h>  // last: OpenBLAS defines a macro named like common parameters

int kid_subset_size(int n1, int n2, int subset_size) {
    if (subset_size > 0) return subset_size;
    int m = n1 < n2 ? n1 : n2;
    return m < KID_SUBSET_SIZE ? m : KID_SUBSET_SIZE;
}

// m distinct indices of 0..n-1 into out (partial Fisher-Yates on perm[n], reset first).
static void draw_subset(int *out, int *perm, int n, int m, uint64_t seed, uint64_t *counter) {
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int t = 0; t < m; t++) {
        int j = t + (int)(eval_rand_u(seed, (*counter)++) * (n - t));
        if (j >= n) j = n - 1;
        int tmp = perm[t];
        perm[t] = perm[j];
        perm[j] = tmp;
        out[t] = perm[t];
    }
}

static void gather(float *dst, const float *src, const int *idx, int m, int d) {
    for (int i = 0; i < m; i++) memcpy(dst + (size_t)i * d, src + (size_t)idx[i] * d, (size_t)d * sizeof *dst);
}

// Sum of (g_ij / d + 1)^3 over all i, j of the m x m dot products g, or over i != j (off_diag).
static double kernel_sum(const float *g, int m, int d, int off_diag) {
    double s = 0;
    #pragma omp parallel for schedule(static) reduction(+ : s)
    for (int i = 0; i < m; i++) {
        double row = 0;
        for (int j = 0; j < m; j++) {
            if (off_diag && i == j) continue;
            double v = (double)g[(size_t)i * m + j] / d + 1.0;
            row += v * v * v;
        }
        s += row;
    }
    return s;
}

int kid_score(const float *x, int n1, const float *y, int n2, int d, int subsets, int subset_size, uint64_t seed,
              double *mean, double *std, MalaErr *err) {
    int m = kid_subset_size(n1, n2, subset_size);
    if (d < 1 || subsets < 1) return mala_errf(err, "KID: %d subsets of %d-d features", subsets, d);
    if (m < 2 || m > n1 || m > n2)
        return mala_errf(err, "KID: subsets of %d need at least that many (and 2) images on each side (%d and %d)", m,
                         n1, n2);
    int nmax = n1 > n2 ? n1 : n2;
    int *perm = xmalloc((size_t)nmax * sizeof *perm), *idx = xmalloc((size_t)m * sizeof *idx);
    float *fx = xmalloc((size_t)m * d * sizeof *fx), *fy = xmalloc((size_t)m * d * sizeof *fy);
    float *g = xmalloc((size_t)m * m * sizeof *g);
    double *mmd = xmalloc((size_t)subsets * sizeof *mmd);
    uint64_t s = eval_rand_seed("kid") + seed, counter = 0;
    for (int t = 0; t < subsets; t++) {
        draw_subset(idx, perm, n1, m, s, &counter);
        gather(fx, x, idx, m, d);
        draw_subset(idx, perm, n2, m, s, &counter);
        gather(fy, y, idx, m, d);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, d, 1.0f, fx, d, fx, d, 0.0f, g, m);
        double kxx = kernel_sum(g, m, d, 1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, d, 1.0f, fy, d, fy, d, 0.0f, g, m);
        double kyy = kernel_sum(g, m, d, 1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, d, 1.0f, fx, d, fy, d, 0.0f, g, m);
        double kxy = kernel_sum(g, m, d, 0);
        mmd[t] = (kxx + kyy) / ((double)m * (m - 1)) - 2.0 * kxy / ((double)m * m);
    }
    double sum = 0, sq = 0;
    for (int t = 0; t < subsets; t++) sum += mmd[t];
    *mean = sum / subsets;
    for (int t = 0; t < subsets; t++) sq += (mmd[t] - *mean) * (mmd[t] - *mean);
    *std = sqrt(sq / subsets);
    free(perm);
    free(idx);
    free(fx);
    free(fy);
    free(g);
    free(mmd);
    return 0;
}
