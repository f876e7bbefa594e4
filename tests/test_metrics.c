// Precision/recall (ADM evaluator) and KID (torch-fidelity) against the numpy references of
// tools/ref/ref_metrics.py (tests/fixtures/metrics_ref.npz).
#include "testutil.h"
#include "formats/npy.h"
#include "eval/kid.h"
#include "eval/prdc.h"

#define FIX "tests/fixtures/metrics_ref.npz"

static float *load_f32(const char *key, int *n, int *d) {
    NpyArray a;
    MalaErr err;
    ck_assert_msg(npz_load(FIX, key, &a, &err) == 0, "%s", err.msg);
    float *x;
    ck_assert_msg(npy_to_f32(&a, &x, key, &err) == 0, "%s", err.msg);
    if (n) *n = (int)a.shape[0];
    if (d) *d = a.ndim > 1 ? (int)a.shape[1] : 1;
    npy_free(&a);
    return x;
}

static double load_scalar(const char *key) {
    float *x = load_f32(key, NULL, NULL);
    NpyArray a;
    MalaErr err;
    ck_assert(npz_load(FIX, key, &a, &err) == 0);
    double *v;
    ck_assert(npy_to_f64(&a, &v, key, &err) == 0);
    double r = v[0];
    free(v);
    free(x);
    npy_free(&a);
    return r;
}

START_TEST(precision_recall_matches_numpy) {
    int nr, ng, d, d2;
    float *ref = load_f32("ref", &nr, &d), *gen = load_f32("gen", &ng, &d2);
    ck_assert_int_eq(d, d2);
    double p, r;
    MalaErr err;
    ck_assert_msg(precision_recall(ref, nr, gen, ng, d, PR_K, &p, &r, &err) == 0, "%s", err.msg);
    double pe = load_scalar("precision"), re = load_scalar("recall");
    // fractions of 250 and 300 images: equal unless a distance sits on a ball's edge
    ck_assert_msg(fabs(p - pe) < 0.5 / ng && fabs(r - re) < 0.5 / nr, "precision %.6f vs %.6f, recall %.6f vs %.6f",
                  p, pe, r, re);
    ck_assert(p > 0.5 && r < 0.5);  // the fixture's generated set is narrower than the reference
    // identical sets cover each other completely
    ck_assert(precision_recall(ref, nr, ref, nr, d, PR_K, &p, &r, &err) == 0);
    ck_assert(p == 1.0 && r == 1.0);
    // too few images for k = 3 is an error, not a number
    ck_assert(precision_recall(ref, 3, gen, ng, d, PR_K, &p, &r, &err) != 0);
    ck_assert_msg(strstr(err.msg, "more than k = 3"), "%s", err.msg);
    free(ref);
    free(gen);
}
END_TEST

START_TEST(kid_matches_numpy) {
    int nr, ng, d;
    float *ref = load_f32("ref", &nr, &d), *gen = load_f32("gen", &ng, NULL);
    ck_assert_int_eq(kid_subset_size(nr, ng, 0), 250);
    ck_assert_int_eq(kid_subset_size(5000, 3000, 0), KID_SUBSET_SIZE);
    double m, s;
    MalaErr err;
    ck_assert_msg(kid_score(ref, nr, gen, ng, d, 10, 0, 0, &m, &s, &err) == 0, "%s", err.msg);
    double me = load_scalar("kid_mean"), se = load_scalar("kid_std");
    ck_assert_msg(fabs(m - me) <= 1e-5 * fabs(me) && fabs(s - se) <= 1e-3 * se, "KID %.9e +- %.9e vs %.9e +- %.9e", m,
                  s, me, se);
    ck_assert(kid_score(ref, nr, gen, ng, d, 20, 40, 5, &m, &s, &err) == 0);
    me = load_scalar("kid40_mean");
    se = load_scalar("kid40_std");
    ck_assert_msg(fabs(m - me) <= 1e-5 * fabs(me) && fabs(s - se) <= 1e-4 * se, "KID/40 %.9e +- %.9e vs %.9e +- %.9e",
                  m, s, me, se);
    // two halves of one distribution: the unbiased estimate is near 0 (either sign), far below the fixture's
    ck_assert(kid_score(ref, nr / 2, ref + (size_t)(nr / 2) * d, nr / 2, d, 10, 100, 1, &m, &s, &err) == 0);
    ck_assert_msg(fabs(m) < 0.1 * me, "KID of two halves of one set %.3e", m);
    ck_assert(kid_score(ref, nr, gen, ng, d, 10, 251, 0, &m, &s, &err) != 0);
    free(ref);
    free(gen);
}
END_TEST

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, precision_recall_matches_numpy);
    tcase_add_test(tc, kid_matches_numpy);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
