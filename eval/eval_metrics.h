// The feature-set metrics of `mala eval fid` beside the Frechet distance: the kept feature rows
// of each side, their place in a statistics file, and precision/recall (eval/prdc.h) and KID
// (eval/kid.h) as JSON fields. P/R and KID use the first EVAL_KEEP_FEATS rows of each side (the
// ADM evaluator's reference batches hold 10,000 images), so a stats file stores that many.
#ifndef MALA_EVAL_METRICS_H
#define MALA_EVAL_METRICS_H

#include <stdint.h>

#include "core/common.h"  // defines: MalaErr
#include "eval/fid.h"     // defines: FidStats
#include "formats/json.h"    // defines: JsonBuf

#define EVAL_KEEP_FEATS 10000

typedef struct {
    int dim, n;   // rows kept so far (at most EVAL_KEEP_FEATS)
    float *x;     // [EVAL_KEEP_FEATS, dim] once the first row arrives
} FeatRows;

// Keeps rows of x[n, dim] until EVAL_KEEP_FEATS are held.
void feat_rows_add(FeatRows *r, int dim, const float *x, int n);
void feat_rows_free(FeatRows *r);
// mu, sigma (float64, pytorch-fid's layout), the sFID statistics mu_s, sigma_s when spatial is
// not NULL, and the kept rows as `feats` (float32 [n, dim]).
int stats_save_with_feats(const FidStats *s, const FidStats *spatial, const FeatRows *r, const char *path,
                          MalaErr *err);
// `feats` of a statistics file into r (r->n = 0 when the file has none); its width must be dim.
int stats_load_feats(const char *path, int dim, FeatRows *r, MalaErr *err);
// Appends ,"precision":P,"recall":R,"kid_mean":M,"kid_std":S,"pr_n":[nref,ngen],"kid_subset":m
// (KID_SUBSETS subsets, seed 0); prints them on stderr too; out (may be NULL) gets precision,
// recall, KID mean and std. Returns 0, or -1 with err set.
int json_pr_kid(JsonBuf *b, const FeatRows *ref, const FeatRows *gen, double *out, MalaErr *err);

#endif
