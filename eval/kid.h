// Kernel Inception Distance as torch-fidelity computes it (metric_kid.py): the unbiased MMD^2
// with the polynomial kernel k(x, y) = (x.y / d + 1)^3, averaged over `subsets` random subsets of
// m rows drawn without replacement from each feature set:
//
//   MMD^2 = (sum_{i!=j} k(x_i, x_j) + sum_{i!=j} k(y_i, y_j)) / (m (m - 1)) - 2 sum_{i,j} k(x_i, y_j) / m^2
//
// kid_mean and kid_std (population std, as numpy) over the subsets. torch-fidelity draws the
// subsets with numpy's RandomState(2020); here subset s of set a (0: first, 1: second) is a
// partial Fisher-Yates shuffle driven by eval_rand_u(eval_rand_seed("kid") + seed, counter), the
// counter running over all draws in order (tools/ref/ref_metrics.py replays it). Dot products are
// float32 (sgemm, as torch-fidelity's float32 numpy), kernel values and sums float64.
#ifndef MALA_KID_H
#define MALA_KID_H

#include <stdint.h>

#include "core/common.h"  // defines: MalaErr

#define KID_SUBSETS 100
#define KID_SUBSET_SIZE 1000

// The subset size used: min(KID_SUBSET_SIZE, n1, n2) when subset_size <= 0, else subset_size.
int kid_subset_size(int n1, int n2, int subset_size);
// x [n1, d], y [n2, d]. Needs 2 <= m <= min(n1, n2). Returns 0, or -1 with err set.
int kid_score(const float *x, int n1, const float *y, int n2, int d, int subsets, int subset_size, uint64_t seed,
              double *mean, double *std, MalaErr *err);

#endif
