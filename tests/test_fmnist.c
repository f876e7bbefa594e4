// The Fashion-MNIST feature classifier (eval/fmnist_features.h): the C forward against PyTorch
// (tools/ref/make_fmnist_fixtures.py), its loader's errors on bad files, and the calibration order
// of its Frechet distance on a few hundred images: real test images < per-class mean images <
// Gaussian noise, each against real training images.
#include <unistd.h>

#include "testutil.h"
#include "core/rng.h"
#include "formats/safetensors.h"
#include "eval/fid.h"
#include "eval/fmnist_features.h"
#include "data/dataset.h"

#define ASSET "assets/" FMNIST_FEAT_FILE
#define FIX "tests/fixtures/fmnist_feat.safetensors"
#define S FMNIST_FEAT_SIZE
#define D FMNIST_FEAT_DIM
#define K FMNIST_FEAT_CLASSES

static float *fixture(const StFile *f, const char *name, size_t *n) {
    const StTensor *t = st_find(f, name);
    ck_assert_msg(t, "%s has no %s", FIX, name);
    *n = (size_t)st_numel(t);
    float *x = xmalloc(*n * sizeof *x);
    MalaErr err;
    ck_assert_msg(st_read_f32(f, t, x, &err) == 0, "%s", err.msg);
    return x;
}

START_TEST(forward_matches_torch) {
    StFile f;
    MalaErr err;
    ck_assert_msg(st_open(&f, FIX, &err) == 0, "%s", err.msg);
    size_t nx, nf, nl;
    float *x = fixture(&f, "in", &nx), *fe = fixture(&f, "feats", &nf), *le = fixture(&f, "logits", &nl);
    st_close(&f);
    int N = (int)(nx / (S * S));
    ck_assert_int_eq(nf, (size_t)N * D);
    ck_assert_int_eq(nl, (size_t)N * K);
    float *feats = xmalloc(nf * sizeof *feats), *logits = xmalloc(nl * sizeof *logits);
    for (int mb = N; mb >= 3; mb -= N - 3) {  // one batch, then chunks of 3
        FmnistNet *m = fmnist_net_load(ASSET, NULL, mb, &err);
        ck_assert_msg(m, "%s", err.msg);
        fmnist_net_forward(m, x, N, feats, logits);
        double df = tu_max_abs_diff(feats, fe, nf), dl = tu_max_abs_diff(logits, le, nl);
        ck_assert_msg(df < 1e-4 && dl < 1e-4, "batch %d: features differ by %.3g, logits by %.3g", mb, df, dl);
        printf("batch %d: features within %.2g, logits within %.2g of PyTorch\n", mb, df, dl);
        ck_assert(fmnist_net_test_accuracy(m) >= 0.89);  // the shipped weights (0.8974), not a stand-in
        fmnist_net_free(m);
    }
    free(x); free(fe); free(le); free(feats); free(logits);
}
END_TEST

// Writes the asset's tensors to path, with `drop` left out, `reshape` given one more row, `nan`
// holding a NaN and an `extra` tensor added (each NULL for none).
static void write_variant(const char *path, const char *drop, const char *reshape, const char *nan, const char *extra) {
    StFile f;
    MalaErr err;
    ck_assert(st_open(&f, ASSET, &err) == 0);
    StWriter *w = st_writer_new();
    float one = 1;
    for (int i = 0; i < f.n; i++) {
        const StTensor *t = &f.tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        int64_t shape[ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        size_t n = (size_t)st_numel(t);
        float *x = xcalloc(n + 64 * 128, sizeof *x);
        ck_assert(st_read_f32(&f, t, x, &err) == 0);
        if (reshape && !strcmp(t->name, reshape)) shape[0] += 1;
        if (nan && !strcmp(t->name, nan)) x[n / 2] = NAN;
        st_writer_add_copy(w, t->name, ST_F32, shape, t->ndim, x);
        free(x);
    }
    int64_t s1[1] = {1};
    if (extra) st_writer_add_copy(w, extra, ST_F32, s1, 1, &one);
    ck_assert_msg(st_writer_save(w, path, &err) == 0, "%s", err.msg);
    st_writer_free(w);
    st_close(&f);
}

static void expect_error(const char *path, const char *what) {
    MalaErr err;
    FmnistNet *m = fmnist_net_load(path, NULL, 4, &err);
    ck_assert_msg(!m, "%s loaded", path);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, what), "%s: '%s' lacks '%s'", path, err.msg, what);
    ck_assert_msg(!strchr(err.msg, '\n'), "one line: %s", err.msg);
}

START_TEST(bad_files_name_the_tensor) {
    tu_make_tmpdir("fmnist");
    char p[512];
    snprintf(p, sizeof p, "%s/c.safetensors", tu_tmp);
    write_variant(p, "blocks.2.norm.bias", NULL, NULL, NULL);
    expect_error(p, "'blocks.2.norm.bias' is missing");
    write_variant(p, NULL, "fc.weight", NULL, NULL);
    expect_error(p, "'fc.weight' has shape");
    write_variant(p, NULL, NULL, "blocks.1.conv.weight", NULL);
    expect_error(p, "'blocks.1.conv.weight' holds a non-finite value");
    write_variant(p, NULL, NULL, NULL, "head.weight");
    expect_error(p, "'head.weight' is not part of");
    snprintf(p, sizeof p, "%s/none.safetensors", tu_tmp);
    expect_error(p, "none.safetensors");
    write_variant(p, NULL, NULL, NULL, NULL);  // the same tensors load
    MalaErr err;
    FmnistNet *m = fmnist_net_load(p, NULL, 4, &err);
    ck_assert_msg(m, "%s", err.msg);
    fmnist_net_free(m);
    tu_rm_tmpdir();
}
END_TEST

// Features (and, with labels, correct predictions) of N images x [N, 1, 32, 32] in [-1, 1].
static FidStats *stats_of(FmnistNet *m, const float *x, int N, const int32_t *labels, double *acc) {
    float *feats = xmalloc((size_t)N * D * sizeof *feats), *logits = xmalloc((size_t)N * K * sizeof *logits);
    fmnist_net_forward(m, x, N, feats, logits);
    FidStats *s = fid_stats_new(D);
    fid_stats_add(s, feats, N);
    MalaErr err;
    ck_assert_msg(fid_stats_finalize(s, &err) == 0, "%s", err.msg);
    int correct = 0;
    for (int i = 0; i < N && labels; i++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (logits[i * K + k] > logits[i * K + best]) best = k;
        correct += best == labels[i];
    }
    if (acc) *acc = (double)correct / N;
    free(feats);
    free(logits);
    return s;
}

static float *load_images(Dataset *d, int N, int32_t *labels) {
    float *x = xmalloc((size_t)N * S * S * sizeof *x);
    MalaErr err;
    for (int i = 0; i < N; i++) {
        ck_assert_msg(dataset_get(d, i, 0, x + (size_t)i * S * S, &err) == 0, "%s", err.msg);
        if (labels) labels[i] = dataset_label(d, i);
    }
    return x;
}

START_TEST(calibration_order) {
    enum { NTRAIN = 1000, N = 300 };
    MalaErr err;
    Dataset *train = dataset_open("fashion-mnist", 0, 0, &err), *test = dataset_open("fashion-mnist-test", 0, 0, &err);
    ck_assert_msg(train && test, "%s", err.msg);
    FmnistNet *m = fmnist_net_load(ASSET, NULL, 100, &err);
    ck_assert_msg(m, "%s", err.msg);
    int32_t ytr[NTRAIN], y[N];
    float *xtr = load_images(train, NTRAIN, ytr), *real = load_images(test, N, y);
    // per-class mean images of the training subset, image i of class i % 10
    double mean[K][S * S] = {{0}};
    int count[K] = {0};
    for (int i = 0; i < NTRAIN; i++) {
        count[ytr[i]]++;
        for (int p = 0; p < S * S; p++) mean[ytr[i]][p] += xtr[(size_t)i * S * S + p];
    }
    float *means = xmalloc((size_t)N * S * S * sizeof *means), *noise = xmalloc((size_t)N * S * S * sizeof *noise);
    int32_t ym[N];
    for (int i = 0; i < N; i++) {
        ym[i] = i % K;
        for (int p = 0; p < S * S; p++) means[(size_t)i * S * S + p] = (float)(mean[ym[i]][p] / count[ym[i]]);
    }
    Rng r;
    rng_seed(&r, 11);
    rng_normal_fill(&r, noise, (size_t)N * S * S);
    for (size_t i = 0; i < (size_t)N * S * S; i++) noise[i] = noise[i] < -1 ? -1 : noise[i] > 1 ? 1 : noise[i];
    double acc_real, acc_means;
    FidStats *ref = stats_of(m, xtr, NTRAIN, NULL, NULL), *s_real = stats_of(m, real, N, y, &acc_real),
             *s_means = stats_of(m, means, N, ym, &acc_means), *s_noise = stats_of(m, noise, N, NULL, NULL);
    double fd_real, fd_means, fd_noise;
    ck_assert(fid_from_stats(s_real, ref, &fd_real, &err) == 0);
    ck_assert(fid_from_stats(s_means, ref, &fd_means, &err) == 0);
    ck_assert(fid_from_stats(s_noise, ref, &fd_noise, &err) == 0);
    printf("calibration (%d images vs %d training images): FD real %.3f (acc %.3f), class means %.3f (acc %.3f), "
           "noise %.3f\n", N, NTRAIN, fd_real, acc_real, fd_means, acc_means, fd_noise);
    ck_assert_msg(fd_real < fd_means && fd_means < fd_noise, "FD order: real %.3f, means %.3f, noise %.3f", fd_real,
                  fd_means, fd_noise);
    ck_assert_msg(acc_real > 0.85, "class accuracy on real test images %.3f", acc_real);
    fid_stats_free(ref); fid_stats_free(s_real); fid_stats_free(s_means); fid_stats_free(s_noise);
    free(xtr); free(real); free(means); free(noise);
    fmnist_net_free(m);
    dataset_close(train);
    dataset_close(test);
}
END_TEST

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    Suite *s = suite_create("fmnist");
    TCase *tc = tcase_create("fmnist");
    tcase_add_test(tc, forward_matches_torch);
    tcase_add_test(tc, bad_files_name_the_tensor);
    tcase_add_test(tc, calibration_order);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
