// FID and Inception Score (docs/design.md §4), as pytorch-fid / torch-fidelity compute them.
//
// Statistics: mean and covariance (divided by N-1) in float64, accumulated in a stream so that
// 50K x 2048 features need not be kept (the running sums are shifted by the first feature vector
// to avoid cancellation). Files: .npz with `mu` (float64 [d]) and `sigma` (float64 [d, d]),
// pytorch-fid's format; ADM reference batches carry the same two arrays.
//
// FID = |mu1 - mu2|^2 + tr S1 + tr S2 - 2 tr sqrt(S1 S2), where tr sqrt(S1 S2) is the sum of the
// square roots of the eigenvalues of sqrt(S1) S2 sqrt(S1). sqrt(S1) comes from S1's symmetric
// eigendecomposition V diag(w) V^T (negative w clamped to 0); sqrt(S1) S2 sqrt(S1) is similar (by
// the orthogonal V) to E^T S2 E with E = V diag(sqrt(w)), whose eigenvalues LAPACK's dsyevd gives;
// tiny negative ones are clamped to 0. Exact for rank-deficient covariances, where scipy's sqrtm
// struggles.
#ifndef MALA_FID_H
#define MALA_FID_H

#include <stdint.h>

#include "core/common.h"  // defines: MalaErr

typedef struct {
    int dim;
    int64_t n;         // samples accumulated (0 for stats loaded from a file that does not say)
    double *mu;        // [dim]        valid after fid_stats_finalize or fid_stats_load
    double *sigma;     // [dim, dim]
    // streaming accumulation
    double *shift;     // [dim] the first sample
    double *sum;       // [dim] sum of (x - shift)
    double *sxx;       // [dim, dim] upper triangle of sum of (x - shift)(x - shift)^T
    double *buf;       // [buf_cap, dim] pending rows
    int buf_rows, buf_cap;
} FidStats;

FidStats *fid_stats_new(int dim);
void fid_stats_free(FidStats *s);
// Adds n feature rows x[n, dim].
void fid_stats_add(FidStats *s, const float *x, int n);
// Computes mu and sigma from what was added (needs n >= 2).
int fid_stats_finalize(FidStats *s, MalaErr *err);
int fid_stats_save(const FidStats *s, const char *path, MalaErr *err);
// The same plus the sFID statistics as `mu_s` and `sigma_s` (the ADM reference batches' names);
// spatial NULL writes only mu and sigma.
int fid_stats_save_pair(const FidStats *s, const FidStats *spatial, const char *path, MalaErr *err);
// Reads `mu` and `sigma` (any float dtype; sigma is symmetrised); checks shapes and finiteness.
FidStats *fid_stats_load(const char *path, MalaErr *err);
// The same for other member names (the sFID statistics: "mu_s", "sigma_s").
FidStats *fid_stats_load_keys(const char *path, const char *mu_key, const char *sigma_key, MalaErr *err);

// The Frechet distance between two Gaussians of dimension d (S1, S2 row-major d x d).
int frechet_distance(const double *mu1, const double *s1, const double *mu2, const double *s2, int d, double *out,
                     MalaErr *err);
int fid_from_stats(const FidStats *a, const FidStats *b, double *fid, MalaErr *err);

// Inception Score of N logit rows [N, K] (K = 1008 for the FID Inception): `splits` consecutive
// splits (rows [i N / splits, (i+1) N / splits)), per split exp(mean_x KL(p(y|x) || p(y))); *mean
// and *std (population std, as numpy) over the splits. Computed in float64 from log-softmax, with
// log p(y) as a log-sum-exp of the log p(y|x), so sharply peaked logits (probabilities that
// underflow) still give a finite score, at most the split size. Non-finite logits are an error.
int inception_score(const float *logits, int N, int K, int splits, double *mean, double *std, MalaErr *err);

#endif
