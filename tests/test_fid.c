// FID statistics, the Frechet distance and the Inception Score against numpy / scipy references
// (tools/ref/make_inception_fixtures.py writes fid_ref.txt). The 2048-d features are not stored: both
// sides regenerate them from the shared generator (eval/inception.h: eval_rand_u).
#include <unistd.h>

#include "testutil.h"
#include "formats/npy.h"
#include "eval/fid.h"
#include "eval/inception.h"
#include "formats/json.h"

#define FIX "tests/fixtures/"
#define D 2048


// fid_ref.txt: "key v1 v2 ..." lines; returns the numbers after `key` (and the words between).
static int ref_line(const char *key, char *line, size_t cap) {
    size_t len;
    char *txt = tu_read_file(FIX "fid_ref.txt", &len);
    txt = realloc(txt, len + 1);
    txt[len] = 0;
    int found = 0;
    for (char *l = strtok(txt, "\n"); l; l = strtok(NULL, "\n")) {
        size_t k = strlen(key);
        if (strncmp(l, key, k) == 0 && l[k] == ' ') {
            snprintf(line, cap, "%s", l + k + 1);
            found = 1;
            break;
        }
    }
    free(txt);
    ck_assert_msg(found, "fid_ref.txt has no '%s'", key);
    return 0;
}
static double ref_value(const char *key) {
    char line[256];
    ref_line(key, line, sizeof line);
    return strtod(line, NULL);
}

// make_inception_fixtures.py: fid_features. f[n, j] = s_j u[n, j] + 0.5 u[n, (7j+3) % d] + m_j.
static float *make_features(const char *tag, int n, int d) {
    char name[64];
    snprintf(name, sizeof name, "%s/u", tag);
    uint64_t su = eval_rand_seed(name);
    snprintf(name, sizeof name, "%s/s", tag);
    uint64_t ss = eval_rand_seed(name);
    snprintf(name, sizeof name, "%s/m", tag);
    uint64_t sm = eval_rand_seed(name);
    double *s = malloc((size_t)d * sizeof *s), *m = malloc((size_t)d * sizeof *m);
    for (int j = 0; j < d; j++) {
        s[j] = 0.2 + 1.3 * eval_rand_u(ss, (uint64_t)j);
        m[j] = -0.5 + 1.0 * eval_rand_u(sm, (uint64_t)j);
    }
    float *f = malloc((size_t)n * d * sizeof *f);
    double *u = malloc((size_t)d * sizeof *u);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < d; j++) u[j] = -1.0 + 2.0 * eval_rand_u(su, (uint64_t)i * d + j);
        for (int j = 0; j < d; j++) f[(size_t)i * d + j] = (float)(s[j] * u[j] + 0.5 * u[(7 * j + 3) % d] + m[j]);
    }
    free(s); free(m); free(u);
    return f;
}

// Streams the features in uneven pieces, as an eval run's batches would arrive.
static FidStats *stats_of(const char *tag, int n) {
    float *f = make_features(tag, n, D);
    FidStats *st = fid_stats_new(D);
    int pieces[] = {1, 7, 300, 64};
    int done = 0, k = 0;
    while (done < n) {
        int b = pieces[k++ % 4];
        if (b > n - done) b = n - done;
        fid_stats_add(st, f + (size_t)done * D, b);
        done += b;
    }
    MalaErr err = {{0}};
    ck_assert_msg(fid_stats_finalize(st, &err) == 0, "%s", err.msg);
    free(f);
    return st;
}

static void check_case(const char *key) {
    char line[256], ta[16], tb[16];
    int na, nb;
    double v_sqrtm, v_eigh;
    ref_line(key, line, sizeof line);
    ck_assert_int_eq(sscanf(line, "%15s %d %15s %d %lf %lf", ta, &na, tb, &nb, &v_sqrtm, &v_eigh), 6);
    FidStats *a = stats_of(ta, na), *b = stats_of(tb, nb);
    double fid;
    MalaErr err = {{0}};
    double t0 = now_seconds();
    ck_assert_msg(fid_from_stats(a, b, &fid, &err) == 0, "%s", err.msg);
    double dt = now_seconds() - t0;
    double r1 = fabs(fid - v_sqrtm) / fabs(v_sqrtm), r2 = fabs(fid - v_eigh) / fabs(v_eigh);
    printf("fid %s (%s %d vs %s %d): %.12g; scipy sqrtm %.12g (rel %.1e), numpy eigh (rel %.1e); %.2f s\n", key, ta, na,
           tb, nb, fid, v_sqrtm, r1, r2, dt);
    ck_assert_msg(r1 < 1e-6, "%s: %.12g vs scipy %.12g", key, fid, v_sqrtm);
    // the same route in numpy: equal up to the noise of the ~1450 zero eigenvalues' square roots
    ck_assert_msg(r2 < 1e-7, "%s: %.12g vs eigh %.12g", key, fid, v_eigh);
    fid_stats_free(a);
    fid_stats_free(b);
}

START_TEST(stats_match_numpy) {
    FidStats *a = stats_of("fidA", 4096);
    double tr = 0;
    for (int i = 0; i < D; i++) tr += a->sigma[(size_t)i * D + i];
    ck_assert_double_le(fabs(tr - ref_value("trace_full_a")) / tr, 1e-12);
    ck_assert_double_le(fabs(a->mu[0] - ref_value("mu0_full_a")), 1e-14);
    double s01 = ref_value("sigma01_full_a");
    ck_assert_double_le(fabs(a->sigma[1] - s01), 1e-13);
    ck_assert(a->sigma[1] == a->sigma[D]);  // symmetric
    fid_stats_free(a);
}
END_TEST

START_TEST(fid_full_rank) { check_case("fid_full"); }
END_TEST
START_TEST(fid_rank_deficient) { check_case("fid_rankdef"); }
END_TEST
START_TEST(fid_full_vs_rank_deficient) { check_case("fid_mixed"); }
END_TEST

START_TEST(fid_of_identical_stats_is_zero) {
    // 2048-d from 600 samples (rank 599), and a small full-rank case
    struct { const char *tag; int n, d; } cases[2] = {{"fidC", 600, D}, {"fidE", 1000, 256}};
    for (int k = 0; k < 2; k++) {
        float *f = make_features(cases[k].tag, cases[k].n, cases[k].d);
        FidStats *a = fid_stats_new(cases[k].d);
        fid_stats_add(a, f, cases[k].n);
        free(f);
        MalaErr err = {{0}};
        ck_assert_int_eq(fid_stats_finalize(a, &err), 0);
        double fid, tr = 0;
        for (int i = 0; i < cases[k].d; i++) tr += a->sigma[(size_t)i * cases[k].d + i];
        ck_assert_int_eq(fid_from_stats(a, a, &fid, &err), 0);
        printf("fid of identical stats (n=%d, d=%d, trace %.1f): %.3g\n", cases[k].n, cases[k].d, tr, fid);
        ck_assert_double_lt(fabs(fid), 1e-8 * tr);
        fid_stats_free(a);
    }
}
END_TEST

START_TEST(stats_file_round_trip) {
    FidStats *a = stats_of("fidC", 600);
    tu_make_tmpdir("fid");
    char path[300];
    snprintf(path, sizeof path, "%s/stats.npz", tu_tmp);
    MalaErr err = {{0}};
    ck_assert_msg(fid_stats_save(a, path, &err) == 0, "%s", err.msg);
    // pytorch-fid's format: mu float64 [2048], sigma float64 [2048, 2048]
    NpyArray mu, sigma;
    ck_assert_int_eq(npz_load(path, "mu", &mu, &err), 0);
    ck_assert_int_eq(npz_load(path, "sigma", &sigma, &err), 0);
    ck_assert_str_eq(mu.dtype, "<f8");
    ck_assert_str_eq(sigma.dtype, "<f8");
    ck_assert_int_eq(mu.ndim, 1); ck_assert_int_eq(mu.shape[0], D);
    ck_assert_int_eq(sigma.ndim, 2); ck_assert_int_eq(sigma.shape[1], D);
    npy_free(&mu);
    npy_free(&sigma);
    FidStats *b = fid_stats_load(path, &err);
    ck_assert_msg(b != NULL, "%s", err.msg);
    ck_assert_int_eq(b->dim, D);
    ck_assert(memcmp(a->mu, b->mu, D * sizeof(double)) == 0);
    ck_assert(memcmp(a->sigma, b->sigma, (size_t)D * D * sizeof(double)) == 0);
    fid_stats_free(b);
    // with the sFID statistics: mu_s, sigma_s beside mu, sigma (the ADM reference batches' names)
    FidStats *sp = stats_of("fidB", 300);
    ck_assert_msg(fid_stats_save_pair(a, sp, path, &err) == 0, "%s", err.msg);
    b = fid_stats_load(path, &err);
    FidStats *bs = fid_stats_load_keys(path, "mu_s", "sigma_s", &err);
    ck_assert_msg(b && bs, "%s", err.msg);
    ck_assert(bs->dim == sp->dim && memcmp(sp->mu, bs->mu, (size_t)sp->dim * sizeof(double)) == 0);
    ck_assert(memcmp(sp->sigma, bs->sigma, (size_t)sp->dim * sp->dim * sizeof(double)) == 0);
    ck_assert(memcmp(a->mu, b->mu, D * sizeof(double)) == 0);
    fid_stats_free(b);
    fid_stats_free(bs);
    // a file without them says which member is missing
    ck_assert_msg(fid_stats_save(a, path, &err) == 0, "%s", err.msg);
    ck_assert_ptr_null(fid_stats_load_keys(path, "mu_s", "sigma_s", &err));
    ck_assert_msg(strstr(err.msg, "mu_s"), "%s", err.msg);
    fid_stats_free(sp);
    fid_stats_free(a);
    tu_rm_tmpdir();
}
END_TEST

static void save_arrays(const char *path, const char **keys, NpyArray *arr, int n) {
    MalaErr err = {{0}};
    ck_assert_msg(npz_save(path, keys, arr, n, &err) == 0, "%s", err.msg);
}
static void expect_load_fail(const char *path, const char *needle) {
    MalaErr err = {{0}};
    FidStats *s = fid_stats_load(path, &err);
    ck_assert_msg(s == NULL, "loaded a bad stats file %s", path);
    ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0, "message does not start with the path: %s", err.msg);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "'%s' not in: %s", needle, err.msg);
}

START_TEST(bad_stats_files) {
    tu_make_tmpdir("fid");
    char path[300];
    double mu[4] = {0, 1, 2, 3}, sig[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, sig3[9] = {0};
    NpyArray a[2];
    const char *k2[2] = {"mu", "sigma"}, *k1[1] = {"mu"};

    snprintf(path, sizeof path, "%s/missing.npz", tu_tmp);
    expect_load_fail(path, "missing.npz");

    snprintf(path, sizeof path, "%s/nosigma.npz", tu_tmp);
    npy_wrap(&a[0], "<f8", mu, 1, (int64_t[]){4});
    save_arrays(path, k1, a, 1);
    expect_load_fail(path, "sigma");

    snprintf(path, sizeof path, "%s/mu2d.npz", tu_tmp);
    npy_wrap(&a[0], "<f8", mu, 2, (int64_t[]){2, 2});
    npy_wrap(&a[1], "<f8", sig, 2, (int64_t[]){4, 4});
    save_arrays(path, k2, a, 2);
    expect_load_fail(path, "'mu' must be a 1-D vector");

    snprintf(path, sizeof path, "%s/mismatch.npz", tu_tmp);
    npy_wrap(&a[0], "<f8", mu, 1, (int64_t[]){4});
    npy_wrap(&a[1], "<f8", sig3, 2, (int64_t[]){3, 3});
    save_arrays(path, k2, a, 2);
    expect_load_fail(path, "'sigma' has shape [3, 3], expected [4, 4]");

    snprintf(path, sizeof path, "%s/nan.npz", tu_tmp);
    sig[5] = NAN;
    npy_wrap(&a[1], "<f8", sig, 2, (int64_t[]){4, 4});
    save_arrays(path, k2, a, 2);
    expect_load_fail(path, "non-finite value at [1, 1]");
    sig[5] = 1;

    snprintf(path, sizeof path, "%s/text.npz", tu_tmp);
    FILE *f = fopen(path, "w");
    fputs("not a zip\n", f);
    fclose(f);
    expect_load_fail(path, "text.npz");

    // float32 stats (some tools write them) are accepted and widened
    snprintf(path, sizeof path, "%s/f32.npz", tu_tmp);
    float mu32[4] = {0, 1, 2, 3}, sig32[16] = {2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2};
    npy_wrap(&a[0], "<f4", mu32, 1, (int64_t[]){4});
    npy_wrap(&a[1], "<f4", sig32, 2, (int64_t[]){4, 4});
    save_arrays(path, k2, a, 2);
    MalaErr err = {{0}};
    FidStats *s4 = fid_stats_load(path, &err);
    ck_assert_msg(s4 != NULL, "%s", err.msg);
    // FID of N(mu, 2I) vs N(0, I) in 4-d: |mu|^2 + 4*2 + 4*1 - 2*4*sqrt(2)
    FidStats *z = fid_stats_new(4);
    z->mu = calloc(4, sizeof(double));
    z->sigma = calloc(16, sizeof(double));
    for (int i = 0; i < 4; i++) z->sigma[i * 5] = 1;
    double fid;
    ck_assert_int_eq(fid_from_stats(s4, z, &fid, &err), 0);
    ck_assert_double_eq_tol(fid, 14.0 + 12.0 - 8.0 * sqrt(2.0), 1e-12);

    // dimension mismatch, too few samples
    FidStats *big = stats_of("fidC", 3);
    ck_assert_int_ne(fid_from_stats(s4, big, &fid, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "different dimensions (4 vs 2048)"));
    FidStats *one = fid_stats_new(4);
    fid_stats_add(one, mu32, 1);
    ck_assert_int_ne(fid_stats_finalize(one, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "at least 2 samples"));
    fid_stats_free(one);
    fid_stats_free(big);
    fid_stats_free(z);
    fid_stats_free(s4);
    tu_rm_tmpdir();
}
END_TEST

// make_inception_fixtures.py: is_logits
static float *make_logits(int n, int k) {
    float *x = malloc((size_t)n * k * sizeof *x);
    uint64_t seed = eval_rand_seed("is/logits");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            double v = -3.0 + 6.0 * eval_rand_u(seed, (uint64_t)i * k + j);
            if (j == (i * 37) % k) v += 5.0;
            x[(size_t)i * k + j] = (float)v;
        }
    return x;
}

START_TEST(inception_score_matches_numpy) {
    float *x = make_logits(1003, INCEPTION_CLASSES);
    char line[256];
    double want_m, want_s, m, s;
    MalaErr err = {{0}};
    ref_line("is_1003_10", line, sizeof line);
    ck_assert_int_eq(sscanf(line, "%lf %lf", &want_m, &want_s), 2);
    ck_assert_int_eq(inception_score(x, 1003, INCEPTION_CLASSES, 10, &m, &s, &err), 0);
    printf("IS (1003 samples, 10 splits): %.12g +- %.12g; numpy %.12g +- %.12g\n", m, s, want_m, want_s);
    ck_assert_double_le(fabs(m - want_m) / want_m, 1e-10);
    ck_assert_double_le(fabs(s - want_s), 1e-10 * want_m);
    ref_line("is_50_1", line, sizeof line);
    ck_assert_int_eq(sscanf(line, "%lf %lf", &want_m, &want_s), 2);
    ck_assert_int_eq(inception_score(x, 50, INCEPTION_CLASSES, 1, &m, &s, &err), 0);
    ck_assert_double_le(fabs(m - want_m) / want_m, 1e-10);
    ck_assert_double_eq(s, 0);
    // more splits than samples
    ck_assert_int_ne(inception_score(x, 5, INCEPTION_CLASSES, 10, &m, &s, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "5 samples cannot make 10 splits"));
    // identical rows: p(y|x) = p(y), KL 0, IS 1
    for (int i = 1; i < 20; i++) memcpy(x + (size_t)i * INCEPTION_CLASSES, x, INCEPTION_CLASSES * sizeof *x);
    ck_assert_int_eq(inception_score(x, 20, INCEPTION_CLASSES, 2, &m, &s, &err), 0);
    ck_assert_double_eq_tol(m, 1.0, 1e-12);
    free(x);
}
END_TEST


// The Inception Score in long double (exponent range to 1e-4951: nothing underflows for these
// logits), straight from the definition: p = softmax, p(y) = mean p, exp(mean KL).
static double is_long_double(const float *x, int n, int k) {
    long double *p = malloc((size_t)n * k * sizeof *p), *py = calloc((size_t)k, sizeof *py), kl = 0;
    for (int i = 0; i < n; i++) {
        long double mx = x[(size_t)i * k], sum = 0;
        for (int j = 0; j < k; j++) mx = fmaxl(mx, x[(size_t)i * k + j]);
        for (int j = 0; j < k; j++) sum += p[(size_t)i * k + j] = expl((long double)x[(size_t)i * k + j] - mx);
        for (int j = 0; j < k; j++) { p[(size_t)i * k + j] /= sum; py[j] += p[(size_t)i * k + j] / n; }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            long double q = p[(size_t)i * k + j];
            if (q > 0) kl += q * (logl(q) - logl(py[j]));
        }
    free(p);
    free(py);
    return (double)expl(kl / n);
}

// Sharply peaked logits (an Inception whose fc weights have std 2): probabilities of
// e^-744, the smallest subnormal doubles, whose split mean rounds to 0. log 0 made IS inf and its
// std nan; log-softmax with a log-sum-exp p(y) stays finite and exact.
START_TEST(inception_score_of_peaked_logits) {
    enum { K = INCEPTION_CLASSES };
    float *x = calloc(4 * K, sizeof *x);
    x[0] = 744.3f;          // row 0: the other classes get p = e^-744.3 ~ 4.9e-324 (subnormal)
    x[K + 1] = 800.0f;      // row 1, class 1: the others get exactly 0; their mean rounds to 0
    x[2 * K + 5] = 20.0f;   // rows 2, 3: moderate, another class
    x[3 * K + 5] = 700.0f;
    double m, s, want = is_long_double(x, 2, K);
    MalaErr err = {{0}};
    ck_assert_msg(inception_score(x, 2, K, 1, &m, &s, &err) == 0, "%s", err.msg);
    printf("IS of peaked logits: %.15g (long double %.15g)\n", m, want);
    ck_assert(isfinite(m) && s == 0);
    ck_assert_double_le(fabs(m - want), 1e-12 * want);
    ck_assert_int_eq(inception_score(x, 4, K, 2, &m, &s, &err), 0);
    ck_assert(isfinite(m) && isfinite(s) && m >= 1 && m <= 2);
    double w0 = is_long_double(x, 2, K), w1 = is_long_double(x + 2 * K, 2, K);
    ck_assert_double_le(fabs(m - (w0 + w1) / 2), 1e-12 * m);
    ck_assert_double_le(fabs(s - fabs(w0 - w1) / 2), 1e-12 * m);
    // the FID Inception (random weights) with fc scaled to std 2: logits of +-1600 on images
    Inception *net = inception_random(NULL, 8);
    enum { N = 12 };
    float *img = malloc((size_t)N * 3 * 32 * 32 * sizeof *img), *pool = malloc((size_t)N * D * sizeof *pool);
    float *lg = malloc((size_t)N * K * sizeof *lg);
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "img%d", i);
        eval_rand_fill(img + (size_t)i * 3 * 32 * 32, 3 * 32 * 32, name, 0.0, (i % 5 + 1) / 5.0);
    }
    ck_assert_int_eq(inception_forward(net, img, N, 3, 32, 32, pool, lg, &err), 0);
    for (size_t i = 0; i < (size_t)N * K; i++) lg[i] *= (float)(2.0 * sqrt(2048.0));
    want = is_long_double(lg, N, K);
    ck_assert_msg(inception_score(lg, N, K, 1, &m, &s, &err) == 0, "%s", err.msg);
    printf("IS, random Inception with fc std 2, %d images: %.15g (long double %.15g)\n", N, m, want);
    ck_assert_double_le(fabs(m - want), 1e-9 * want);
    // non-finite logits are an error, not a score
    lg[3 * K + 7] = NAN;
    ck_assert_int_ne(inception_score(lg, N, K, 1, &m, &s, &err), 0);
    ck_assert_msg(strstr(err.msg, "logit 7 of sample 3 is nan"), "%s", err.msg);
    lg[3 * K + 7] = INFINITY;
    ck_assert_int_ne(inception_score(lg, N, K, 1, &m, &s, &err), 0);
    ck_assert_msg(strstr(err.msg, "is infinite"), "%s", err.msg);
    inception_free(net);
    free(img); free(pool); free(lg); free(x);
}
END_TEST

// No JSON line holds inf or nan: json_write_line refuses it and names the key.
START_TEST(json_lines_are_finite) {
    char path[] = "/tmp/mala_json_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    FILE *f = fdopen(fd, "w+");
    MalaErr err = {{0}};
    ck_assert_int_eq(json_printf_line(f, &err, "{\"cmd\":\"x\",\"name\":\"inf nan \\\"-nan\",\"ok\":true,\"v\":%.3f,\"z\":null}", 1.5), 0);
    ck_assert_int_ne(json_printf_line(f, &err, "{\"cmd\":\"eval is\",\"is_mean\":%.6f,\"is_std\":%.6f}", INFINITY, NAN), 0);
    ck_assert_msg(strstr(err.msg, "\"is_mean\" is inf"), "%s", err.msg);
    ck_assert_int_ne(json_printf_line(f, &err, "{\"a\":1,\"fid\":%f}", -NAN), 0);
    ck_assert_msg(strstr(err.msg, "\"fid\" is -nan"), "%s", err.msg);
    ck_assert_int_ne(json_printf_line(f, &err, "{\"list\":[1,%g]}", -INFINITY), 0);
    ck_assert_msg(strstr(err.msg, "\"list\" is -inf"), "%s", err.msg);
    rewind(f);
    char buf[512] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(path);
    ck_assert_str_eq(buf, "{\"cmd\":\"x\",\"name\":\"inf nan \\\"-nan\",\"ok\":true,\"v\":1.500,\"z\":null}\n");
    ck_assert_uint_eq(n, strlen(buf));
}
END_TEST

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);  // keep the report lines of a failing (forked) test
    Suite *s = suite_create("fid");
    TCase *tc = tcase_create("fid");
    tcase_add_test(tc, stats_match_numpy);
    tcase_add_test(tc, fid_full_rank);
    tcase_add_test(tc, fid_rank_deficient);
    tcase_add_test(tc, fid_full_vs_rank_deficient);
    tcase_add_test(tc, fid_of_identical_stats_is_zero);
    tcase_add_test(tc, stats_file_round_trip);
    tcase_add_test(tc, bad_stats_files);
    tcase_add_test(tc, inception_score_matches_numpy);
    tcase_add_test(tc, inception_score_of_peaked_logits);
    tcase_add_test(tc, json_lines_are_finite);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
