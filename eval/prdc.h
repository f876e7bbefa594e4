// Improved precision and recall (Kynkaenniemi et al. 2019) as the ADM evaluator computes them
// (guided-diffusion evaluations/evaluator.py, ManifoldEstimator with nhood_sizes = (k,)):
//
//   d(u, v)   = max(|u|^2 - 2 u.v + |v|^2, 0)           squared Euclidean distances
//   r_k(x; S) = the (k+1)-th smallest d(x, s) over s in S (x itself, at distance 0, is the first)
//   precision = fraction of generated g with d(g, r) <= r_k(r; R) for some reference r
//   recall    = fraction of references r with d(r, g) <= r_k(g; G) for some generated g
//
// The evaluator computes d in float16 when that stays finite (float32 otherwise); here the dot
// products are float32 (sgemm) and the norms float64, i.e. its float32 path.
#ifndef MALA_PRDC_H
#define MALA_PRDC_H

#include "core/common.h"  // defines: MalaErr

#define PR_K 3

// ref [nr, d] and gen [ng, d] row-major; needs nr, ng > k. Returns 0, or -1 with err set.
int precision_recall(const float *ref, int nr, const float *gen, int ng, int d, int k, double *precision,
                     double *recall, MalaErr *err);

#endif
