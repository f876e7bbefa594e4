// defines: precision_recall
// Improved precision and recall, k-NN balls of squared feature distances (eval/prdc.h).
#include <stdlib.h>
#include <string.h>

#include "eval/prdc.h"

#include <cblas.h>  // last: OpenBLAS defines a macro named like common parameters

#define ROW_BLOCK 512

static double *row_norms(const float *x, int n, int d) {
    double *nr = xmalloc((size_t)(n ? n : 1) * sizeof *nr);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int c = 0; c < d; c++) s += (double)x[(size_t)i * d + c] * x[(size_t)i * d + c];
        nr[i] = s;
    }
    return nr;
}

// dist[r, j] = d(a_{i0 + r}, b_j) for the rb rows from i0, as float (the evaluator's distance block).
static void distance_block(float *dist, const float *a, const double *na, int i0, int rb, const float *b,
                           const double *nb, int n, int d) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rb, n, d, 1.0f, a + (size_t)i0 * d, d, b, d, 0.0f, dist, n);
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rb; r++) {
        float *row = dist + (size_t)r * n;
        for (int j = 0; j < n; j++) {
            double v = na[i0 + r] - 2.0 * row[j] + nb[j];
            row[j] = v > 0 ? (float)v : 0.0f;
        }
    }
}

// radii[i] = the (k+1)-th smallest distance from x_i to the rows of x (itself included).
static void knn_radii(float *radii, const float *x, const double *nx, int n, int d, int k, float *dist) {
    for (int i0 = 0; i0 < n; i0 += ROW_BLOCK) {
        int rb = n - i0 < ROW_BLOCK ? n - i0 : ROW_BLOCK;
        distance_block(dist, x, nx, i0, rb, x, nx, n, d);
        #pragma omp parallel for schedule(static)
        for (int r = 0; r < rb; r++) {
            const float *row = dist + (size_t)r * n;
            float best[16];  // the k+1 smallest so far, ascending
            int have = 0;
            for (int j = 0; j < n; j++) {
                float v = row[j];
                if (have == k + 1 && v >= best[k]) continue;
                int p = have < k + 1 ? have++ : k;
                while (p > 0 && best[p - 1] > v) { best[p] = best[p - 1]; p--; }
                best[p] = v;
            }
            radii[i0 + r] = best[k];
        }
    }
}

// The fraction of rows of a inside at least one ball (b_j, rb_j).
static double covered(const float *a, const double *na, int n_a, const float *b, const double *nb, const float *rad,
                      int n_b, int d, float *dist) {
    long inside = 0;
    for (int i0 = 0; i0 < n_a; i0 += ROW_BLOCK) {
        int rb = n_a - i0 < ROW_BLOCK ? n_a - i0 : ROW_BLOCK;
        distance_block(dist, a, na, i0, rb, b, nb, n_b, d);
        #pragma omp parallel for schedule(static) reduction(+ : inside)
        for (int r = 0; r < rb; r++) {
            const float *row = dist + (size_t)r * n_b;
            int in = 0;
            for (int j = 0; j < n_b && !in; j++) in = row[j] <= rad[j];
            inside += in;
        }
    }
    return (double)inside / n_a;
}

int precision_recall(const float *ref, int nr, const float *gen, int ng, int d, int k, double *precision,
                     double *recall, MalaErr *err) {
    if (k < 1 || k > 15) return mala_errf(err, "precision/recall: k = %d (1 to 15)", k);
    if (d < 1) return mala_errf(err, "precision/recall: feature dimension %d", d);
    if (nr <= k || ng <= k)
        return mala_errf(err, "precision/recall need more than k = %d images on each side (%d reference, %d generated)",
                         k, nr, ng);
    int nmax = nr > ng ? nr : ng;
    float *dist = xmalloc((size_t)ROW_BLOCK * nmax * sizeof *dist);
    float *rr = xmalloc((size_t)nr * sizeof *rr), *rg = xmalloc((size_t)ng * sizeof *rg);
    double *nref = row_norms(ref, nr, d), *ngen = row_norms(gen, ng, d);
    knn_radii(rr, ref, nref, nr, d, k, dist);
    knn_radii(rg, gen, ngen, ng, d, k, dist);
    *precision = covered(gen, ngen, ng, ref, nref, rr, nr, d, dist);
    *recall = covered(ref, nref, nr, gen, ngen, rg, ng, d, dist);
    free(dist);
    free(rr);
    free(rg);
    free(nref);
    free(ngen);
    return 0;
}
