// defines: fid_stats_new, fid_stats_free, fid_stats_add, fid_stats_finalize, fid_stats_save,
//          fid_stats_save_pair, fid_stats_load, fid_stats_load_keys, frechet_distance, fid_from_stats, inception_score
#include "eval/fid.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <string.h>

#include "formats/npy.h"  // defines: npz_load, npz_save, npy_to_f64

#define FID_BUF_ROWS 256

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------
FidStats *fid_stats_new(int dim) {
    FidStats *s = xcalloc(1, sizeof *s);
    s->dim = dim;
    s->shift = xcalloc((size_t)dim, sizeof *s->shift);
    s->sum = xcalloc((size_t)dim, sizeof *s->sum);
    s->sxx = xcalloc((size_t)dim * dim, sizeof *s->sxx);
    s->buf_cap = FID_BUF_ROWS;
    s->buf = xmalloc((size_t)s->buf_cap * dim * sizeof *s->buf);
    return s;
}

void fid_stats_free(FidStats *s) {
    if (!s) return;
    free(s->mu);
    free(s->sigma);
    free(s->shift);
    free(s->sum);
    free(s->sxx);
    free(s->buf);
    free(s);
}

// sxx += buf^T buf (upper triangle), the pending rows.
static void flush(FidStats *s) {
    if (!s->buf_rows) return;
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, s->dim, s->buf_rows, 1.0, s->buf, s->dim, 1.0, s->sxx, s->dim);
    s->buf_rows = 0;
}

void fid_stats_add(FidStats *s, const float *x, int n) {
    const int d = s->dim;
    if (!s->sxx) FATAL("fid_stats_add: statistics loaded from a file cannot take more samples");
    if (n > 0 && s->n == 0)
        for (int j = 0; j < d; j++) s->shift[j] = x[j];
    for (int i = 0; i < n; i++) {
        double *row = s->buf + (size_t)s->buf_rows * d;
        const float *xi = x + (size_t)i * d;
        for (int j = 0; j < d; j++) {
            row[j] = (double)xi[j] - s->shift[j];
            s->sum[j] += row[j];
        }
        s->n++;
        if (++s->buf_rows == s->buf_cap) flush(s);
    }
}

int fid_stats_finalize(FidStats *s, MalaErr *err) {
    if (s->n < 2) return mala_errf(err, "FID statistics need at least 2 samples, got %lld", (long long)s->n);
    flush(s);
    const int d = s->dim;
    const double n = (double)s->n;
    free(s->mu);
    free(s->sigma);
    s->mu = xmalloc((size_t)d * sizeof *s->mu);
    s->sigma = xmalloc((size_t)d * d * sizeof *s->sigma);
    double *m = xmalloc((size_t)d * sizeof *m);  // mean of the shifted rows
    for (int j = 0; j < d; j++) {
        m[j] = s->sum[j] / n;
        s->mu[j] = s->shift[j] + m[j];
    }
    // sigma = (sum (x-k)(x-k)^T - n m m^T) / (n - 1), mirrored from the upper triangle. (No OpenMP
    // in this file: idle OpenMP workers spinning next to OpenBLAS's threads slow LAPACK down.)
    for (int i = 0; i < d; i++)
        for (int j = i; j < d; j++) {
            double v = (s->sxx[(size_t)i * d + j] - n * m[i] * m[j]) / (n - 1.0);
            s->sigma[(size_t)i * d + j] = v;
            s->sigma[(size_t)j * d + i] = v;
        }
    free(m);
    return 0;
}

int fid_stats_save(const FidStats *s, const char *path, MalaErr *err) { return fid_stats_save_pair(s, NULL, path, err); }

int fid_stats_save_pair(const FidStats *s, const FidStats *spatial, const char *path, MalaErr *err) {
    if (!s->mu || !s->sigma || (spatial && (!spatial->mu || !spatial->sigma)))
        return mala_errf(err, "%s: statistics not finalised", path);
    NpyArray arr[4];
    int64_t shape_mu[2][1] = {{s->dim}, {spatial ? spatial->dim : 0}};
    int64_t shape_sigma[2][2] = {{s->dim, s->dim}, {spatial ? spatial->dim : 0, spatial ? spatial->dim : 0}};
    npy_wrap(&arr[0], "<f8", s->mu, 1, shape_mu[0]);
    npy_wrap(&arr[1], "<f8", s->sigma, 2, shape_sigma[0]);
    if (spatial) {
        npy_wrap(&arr[2], "<f8", spatial->mu, 1, shape_mu[1]);
        npy_wrap(&arr[3], "<f8", spatial->sigma, 2, shape_sigma[1]);
    }
    const char *keys[4] = {"mu", "sigma", "mu_s", "sigma_s"};
    return npz_save(path, keys, arr, spatial ? 4 : 2, err);
}

FidStats *fid_stats_load(const char *path, MalaErr *err) { return fid_stats_load_keys(path, "mu", "sigma", err); }

FidStats *fid_stats_load_keys(const char *path, const char *mu_key, const char *sigma_key, MalaErr *err) {
    NpyArray mu = {0}, sigma = {0};
    double *m = NULL, *sg = NULL;
    char what[64];
    FidStats *s = NULL;
    if (npz_load(path, mu_key, &mu, err) || npz_load(path, sigma_key, &sigma, err)) goto done;
    if (mu.ndim != 1 || mu.shape[0] < 1) {
        mala_errf(err, "%s: '%s' must be a 1-D vector, has %d dimensions", path, mu_key, mu.ndim);
        goto done;
    }
    int64_t d = mu.shape[0];
    if (sigma.ndim != 2 || sigma.shape[0] != d || sigma.shape[1] != d) {
        char have[64] = "[";
        for (int k = 0; k < sigma.ndim; k++) {
            size_t n = strlen(have);
            snprintf(have + n, sizeof have - n, "%s%lld", k ? ", " : "", (long long)sigma.shape[k]);
        }
        size_t n = strlen(have);
        snprintf(have + n, sizeof have - n, "]");
        mala_errf(err, "%s: '%s' has shape %s, expected [%lld, %lld] to match '%s'", path, sigma_key, have,
                  (long long)d, (long long)d, mu_key);
        goto done;
    }
    if (d > (1 << 15)) { mala_errf(err, "%s: dimension %lld is implausibly large", path, (long long)d); goto done; }
    snprintf(what, sizeof what, "%s:%s", path, mu_key);
    if (npy_to_f64(&mu, &m, what, err)) goto done;
    snprintf(what, sizeof what, "%s:%s", path, sigma_key);
    if (npy_to_f64(&sigma, &sg, what, err)) goto done;
    for (int64_t i = 0; i < d; i++)
        if (!isfinite(m[i])) {
            mala_errf(err, "%s: '%s' has a non-finite value at %lld", path, mu_key, (long long)i);
            goto done;
        }
    for (int64_t i = 0; i < d * d; i++)
        if (!isfinite(sg[i])) {
            mala_errf(err, "%s: '%s' has a non-finite value at [%lld, %lld]", path, sigma_key, (long long)(i / d),
                      (long long)(i % d));
            goto done;
        }
    for (int64_t i = 0; i < d; i++)
        for (int64_t j = i + 1; j < d; j++) {
            double v = 0.5 * (sg[i * d + j] + sg[j * d + i]);
            sg[i * d + j] = sg[j * d + i] = v;
        }
    s = xcalloc(1, sizeof *s);
    s->dim = (int)d;
    s->mu = m;
    s->sigma = sg;
    m = sg = NULL;
done:
    free(m);
    free(sg);
    npy_free(&mu);
    npy_free(&sigma);
    return s;
}

// ---------------------------------------------------------------------------------------------
// Frechet distance
// ---------------------------------------------------------------------------------------------
int frechet_distance(const double *mu1, const double *s1, const double *mu2, const double *s2, int d, double *out,
                     MalaErr *err) {
    if (d < 1) return mala_errf(err, "frechet_distance: dimension %d", d);
    const size_t dd = (size_t)d * d;
    double diff2 = 0, tr1 = 0, tr2 = 0;
    for (int i = 0; i < d; i++) {
        double t = mu1[i] - mu2[i];
        diff2 += t * t;
        tr1 += s1[(size_t)i * d + i];
        tr2 += s2[(size_t)i * d + i];
    }
    double *e = xmalloc(dd * sizeof *e), *t = xmalloc(dd * sizeof *t), *m = xmalloc(dd * sizeof *m);
    double *w = xmalloc((size_t)d * sizeof *w);
    int rc = 0;
    // S1 = V diag(w) V^T; E = V diag(sqrt(max(w, 0)))  (eigenvectors are the columns of e)
    memcpy(e, s1, dd * sizeof *e);
    lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', d, e, d, w);
    if (info != 0) { rc = mala_errf(err, "frechet_distance: eigendecomposition of sigma1 failed (info %d)", (int)info); goto done; }
    for (int j = 0; j < d; j++) w[j] = sqrt(w[j] > 0 ? w[j] : 0);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) e[(size_t)i * d + j] *= w[j];
    // M = E^T S2 E, similar to sqrt(S1) S2 sqrt(S1)
    cblas_dsymm(CblasRowMajor, CblasLeft, CblasUpper, d, d, 1.0, s2, d, e, d, 0.0, t, d);         // t = S2 E
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, d, 1.0, e, d, t, d, 0.0, m, d);    // m = E^T t
    info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'N', 'U', d, m, d, w);
    if (info != 0) { rc = mala_errf(err, "frechet_distance: eigendecomposition failed (info %d)", (int)info); goto done; }
    double tr_covmean = 0;
    for (int j = 0; j < d; j++) tr_covmean += sqrt(w[j] > 0 ? w[j] : 0);
    *out = diff2 + tr1 + tr2 - 2.0 * tr_covmean;
    if (!isfinite(*out)) rc = mala_errf(err, "frechet_distance: result is not finite (non-finite statistics?)");
done:
    free(e);
    free(t);
    free(m);
    free(w);
    return rc;
}

int fid_from_stats(const FidStats *a, const FidStats *b, double *fid, MalaErr *err) {
    if (!a->mu || !a->sigma || !b->mu || !b->sigma) return mala_errf(err, "fid: statistics not finalised");
    if (a->dim != b->dim)
        return mala_errf(err, "fid: statistics of different dimensions (%d vs %d): both must come from the same "
                         "feature layer (pool3, 2048)", a->dim, b->dim);
    return frechet_distance(a->mu, a->sigma, b->mu, b->sigma, a->dim, fid, err);
}

// ---------------------------------------------------------------------------------------------
// Inception Score
// ---------------------------------------------------------------------------------------------
// log_softmax of one row in float64
static void log_softmax(double *lp, const float *x, int K) {
    double mx = x[0];
    for (int k = 1; k < K; k++) mx = x[k] > mx ? x[k] : mx;
    double s = 0;
    for (int k = 0; k < K; k++) s += exp((double)x[k] - mx);
    double ls = log(s);
    for (int k = 0; k < K; k++) lp[k] = (double)x[k] - mx - ls;
}

int inception_score(const float *logits, int N, int K, int splits, double *mean, double *std, MalaErr *err) {
    if (splits < 1 || K < 1 || N < splits)
        return mala_errf(err, "inception score: %d samples cannot make %d splits", N, splits);
    for (int64_t i = 0; i < (int64_t)N * K; i++)
        if (!isfinite(logits[i]))
            return mala_errf(err, "inception score: logit %lld of sample %lld is %s (bad Inception weights?)",
                             (long long)(i % K), (long long)(i / K), isnan(logits[i]) ? "nan" : "infinite");
    double *lp = xmalloc((size_t)K * sizeof *lp), *lpy = xmalloc((size_t)K * sizeof *lpy);
    double *mx = xmalloc((size_t)K * sizeof *mx), *sum = xmalloc((size_t)K * sizeof *sum);
    double *score = xmalloc((size_t)splits * sizeof *score);
    for (int s = 0; s < splits; s++) {
        int64_t a = (int64_t)s * N / splits, b = (int64_t)(s + 1) * N / splits;
        // log p(y) = log mean_i p(y|x_i) = logsumexp_i log p(y|x_i) - log n, accumulated online
        // (m, s: the running maximum and sum exp(lp - m)), so that tiny probabilities do not
        // underflow to log 0.
        for (int k = 0; k < K; k++) { mx[k] = -INFINITY; sum[k] = 0; }
        for (int64_t i = a; i < b; i++) {
            log_softmax(lp, logits + (size_t)i * K, K);
            for (int k = 0; k < K; k++) {
                if (lp[k] > mx[k]) { sum[k] = sum[k] * exp(mx[k] - lp[k]) + 1.0; mx[k] = lp[k]; }
                else sum[k] += exp(lp[k] - mx[k]);
            }
        }
        for (int k = 0; k < K; k++) lpy[k] = mx[k] + log(sum[k]) - log((double)(b - a));
        // KL(p(y|x) || p(y)) = sum_y p(y|x) (log p(y|x) - log p(y)); a term with p(y|x) = 0 is 0.
        double kl = 0;
        for (int64_t i = a; i < b; i++) {
            log_softmax(lp, logits + (size_t)i * K, K);
            double r = 0;
            for (int k = 0; k < K; k++) {
                double p = exp(lp[k]);
                if (p > 0) r += p * (lp[k] - lpy[k]);
            }
            kl += r;
        }
        score[s] = exp(kl / (double)(b - a));
    }
    double m = 0, v = 0;
    for (int s = 0; s < splits; s++) m += score[s];
    m /= splits;
    for (int s = 0; s < splits; s++) v += (score[s] - m) * (score[s] - m);
    *mean = m;
    *std = sqrt(v / splits);
    free(lp);
    free(lpy);
    free(mx);
    free(sum);
    free(score);
    if (!isfinite(*mean) || !isfinite(*std))
        return mala_errf(err, "inception score: the result is not finite (mean %g, std %g)", *mean, *std);
    return 0;
}
