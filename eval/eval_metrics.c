// defines: feat_rows_add, feat_rows_free, stats_save_with_feats, stats_load_feats, json_pr_kid
// Kept feature rows, statistics files with them, and P/R and KID as JSON (eval/eval_metrics.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval_metrics.h"
#include "eval/kid.h"
#include "formats/npy.h"
#include "eval/prdc.h"

void feat_rows_add(FeatRows *r, int dim, const float *x, int n) {
    if (!r->x) {
        r->dim = dim;
        r->x = xmalloc((size_t)EVAL_KEEP_FEATS * dim * sizeof *r->x);
    }
    int k = EVAL_KEEP_FEATS - r->n < n ? EVAL_KEEP_FEATS - r->n : n;
    if (k > 0) memcpy(r->x + (size_t)r->n * dim, x, (size_t)k * dim * sizeof *r->x);
    if (k > 0) r->n += k;
}

void feat_rows_free(FeatRows *r) {
    free(r->x);
    memset(r, 0, sizeof *r);
}

int stats_save_with_feats(const FidStats *s, const FidStats *spatial, const FeatRows *r, const char *path,
                          MalaErr *err) {
    if (!s->mu || !s->sigma || (spatial && (!spatial->mu || !spatial->sigma)))
        return mala_errf(err, "%s: statistics not finalised", path);
    NpyArray arr[5];
    const char *keys[5];
    int n = 0;
    int64_t shape_mu[1] = {s->dim}, shape_sigma[2] = {s->dim, s->dim}, shape_f[2] = {r->n, s->dim};
    int64_t shape_mu_s[1] = {spatial ? spatial->dim : 0}, shape_sigma_s[2] = {shape_mu_s[0], shape_mu_s[0]};
    keys[n] = "mu", npy_wrap(&arr[n++], "<f8", s->mu, 1, shape_mu);
    keys[n] = "sigma", npy_wrap(&arr[n++], "<f8", s->sigma, 2, shape_sigma);
    if (spatial) {
        keys[n] = "mu_s", npy_wrap(&arr[n++], "<f8", spatial->mu, 1, shape_mu_s);
        keys[n] = "sigma_s", npy_wrap(&arr[n++], "<f8", spatial->sigma, 2, shape_sigma_s);
    }
    if (r->n > 0) keys[n] = "feats", npy_wrap(&arr[n++], "<f4", r->x, 2, shape_f);
    return npz_save(path, keys, arr, n, err);
}

int stats_load_feats(const char *path, int dim, FeatRows *r, MalaErr *err) {
    memset(r, 0, sizeof *r);
    char **keys;
    int nk, has = 0;
    if (npz_keys(path, &keys, &nk, err)) return -1;
    for (int i = 0; i < nk; i++) has |= !strcmp(keys[i], "feats");
    npz_keys_free(keys, nk);
    if (!has) return 0;
    NpyArray a;
    if (npz_load(path, "feats", &a, err)) return -1;
    int rc = 0;
    if (a.ndim != 2 || a.shape[1] != dim || a.shape[0] < 1)
        rc = mala_errf(err, "%s: feats must be [N, %d] (the features' width), not %d-dimensional %s%lld", path, dim,
                       a.ndim, a.ndim == 2 ? "with width " : "", a.ndim == 2 ? (long long)a.shape[1] : 0LL);
    float *x = NULL;
    if (!rc) rc = npy_to_f32(&a, &x, "feats", err);
    if (!rc) {
        int n = a.shape[0] > EVAL_KEEP_FEATS ? EVAL_KEEP_FEATS : (int)a.shape[0];
        for (size_t i = 0; i < (size_t)n * dim && !rc; i++)
            if (!isfinite(x[i])) rc = mala_errf(err, "%s: feats holds a non-finite value at [%zu]", path, i);
        if (!rc) feat_rows_add(r, dim, x, n);
    }
    free(x);
    npy_free(&a);
    return rc;
}

int json_pr_kid(JsonBuf *b, const FeatRows *ref, const FeatRows *gen, double *out, MalaErr *err) {
    double p, r, km, ks;
    if (precision_recall(ref->x, ref->n, gen->x, gen->n, ref->dim, PR_K, &p, &r, err)) return -1;
    int m = kid_subset_size(ref->n, gen->n, 0);
    if (kid_score(gen->x, gen->n, ref->x, ref->n, ref->dim, KID_SUBSETS, m, 0, &km, &ks, err)) return -1;
    fprintf(stderr, "precision %.4f  recall %.4f  (k = %d; %d reference, %d generated features)\n", p, r, PR_K, ref->n,
            gen->n);
    fprintf(stderr, "KID %.6f +- %.6f  (%d subsets of %d)\n", km, ks, KID_SUBSETS, m);
    json_buf_printf(b, ",\"precision\":%.6f,\"recall\":%.6f,\"kid_mean\":%.8f,\"kid_std\":%.8f,\"pr_n\":[%d,%d],"
                       "\"kid_subset\":%d", p, r, km, ks, ref->n, gen->n, m);
    if (out) out[0] = p, out[1] = r, out[2] = km, out[3] = ks;
    return 0;
}
