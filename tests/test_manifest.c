// Manifests: every .npz / .npy of mala sample and every statistics file of mala
// eval gets PATH.json beside it, and eval's JSON line carries the same record: the model file's
// SHA-256 and configuration, the sampler and its options, guidance and its channels, the label
// mode, N, the seed, the device and precision, the feature network and its weights' SHA-256, the
// reference's SHA-256 and the program's version. `mala info FILE.npz` prints it. Each test runs
// the built program ($MALA_BIN) on tiny inputs; hashes are checked against sha256sum(1).
#include <sys/stat.h>
#include <unistd.h>

#include "core/sha256.h"
#include "testutil.h"
#include "testcli.h"  // defines: run, g_out, g_err, mala_bin

#define MODEL "tests/fixtures/sample_model.safetensors"  // 8x8x1, 3 classes: fast to sample
#define CLASSIFIER "assets/fmnist_classifier.safetensors"
#define FM_MODEL "assets/mala-dit-fmnist.safetensors"  // 32x32x1: what the classifier takes

static char *slurp_text(const char *path) {
    size_t n;
    char *raw = tu_read_file(path, &n), *s = malloc(n + 1);
    memcpy(s, raw, n);
    s[n] = 0;
    free(raw);
    return s;
}

// "key":"value" (a string member) is in text.
static void expect_member(const char *text, const char *key, const char *value) {
    char want[512];
    snprintf(want, sizeof want, "\"%s\":\"%s\"", key, value);
    ck_assert_msg(strstr(text, want), "no %s in:\n%s", want, text);
}

static void file_hash(const char *path, char hex[65]) {
    MalaErr err;
    ck_assert_msg(sha256_file(path, hex, &err) == 0, "%s", err.msg);
}

START_TEST(test_sample_manifest) {
    tu_make_tmpdir("manifest");
    RUN_OK("sample --ckpt " MODEL " --n 4 --batch 2 --steps 3 --sampler ddim --cfg-scale 2.5 --cfg-channels 1 "
           "--label-mode random --seed 9 --save-npz %s --save-npy %s --threads 1 --device cpu", tp("s.npz"),
           tp("s.npy"));
    char *m = slurp_text(tp("s.npz.json")), *m2 = slurp_text(tp("s.npy.json")), hex[65];
    ck_assert_str_eq(m, m2);
    file_hash(MODEL, hex);
    expect_member(m, "cmd", "mala sample");
    expect_member(m, "model_sha256", hex);
    expect_member(m, "sampler", "ddim");
    expect_member(m, "cfg_channels", "all");  // 1 of a 1-channel model's 1
    expect_member(m, "label_mode", "random");
    expect_member(m, "device", "cpu");
    expect_member(m, "matmul_precision", "fp32");
    ck_assert_msg(strstr(m, "\"steps\":3,") && strstr(m, "\"cfg_scale\":2.5,") && strstr(m, "\"num\":4,") &&
                  strstr(m, "\"seed\":9,") && strstr(m, "\"version\":\"") && strstr(m, "\"model_config\":\"dit "),
                  "%s", m);
    RUN_OK("info %s", tp("s.npz"));
    ck_assert_msg(strstr(g_out, "arrays: arr_0, arr_1") && strstr(g_out, "manifest (") && strstr(g_out, hex) &&
                  strstr(g_out, "label_mode         random"), "%s", g_out);
    RUN_OK("info %s", tp("s.npy"));
    ck_assert_msg(strstr(g_out, "cfg_scale          2.5"), "%s", g_out);
    free(m);
    free(m2);
    unlink(tp("s.npz.json"));
    RUN_OK("info %s", tp("s.npz"));
    ck_assert_msg(strstr(g_out, "no manifest"), "%s", g_out);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(test_eval_manifest) {
    tu_make_tmpdir("manifest");
    const char *fm = "--features fmnist --classifier " CLASSIFIER " --threads 1 --device cpu";
    RUN_OK("eval stats --data fashion-mnist-test --limit 6 --batch 3 --out %s %s", tp("ref.npz"), fm);
    char *st = slurp_text(tp("ref.npz.json")), cls[65], ref[65], model[65];
    file_hash(CLASSIFIER, cls);
    expect_member(st, "cmd", "mala eval stats");
    expect_member(st, "data", "fashion-mnist-test");
    expect_member(st, "features", "fmnist");
    expect_member(st, "features_sha256", cls);
    ck_assert_msg(strstr(st, "\"n\":6") && strstr(st, "\"version\":"), "%s", st);
    free(st);
    RUN_OK("eval fid --ckpt " FM_MODEL " --ref %s --num 4 --sample-batch 2 --batch 2 --steps 2 --save-stats %s %s",
           tp("ref.npz"), tp("s.npz"), fm);
    file_hash(tp("ref.npz"), ref);
    file_hash(FM_MODEL, model);
    expect_member(g_out, "model_sha256", model);
    expect_member(g_out, "features_sha256", cls);
    expect_member(g_out, "ref_sha256", ref);
    expect_member(g_out, "cfg_channels", "all");
    expect_member(g_out, "label_mode", "random");
    expect_member(g_out, "matmul_precision", "fp32");
    ck_assert_msg(strstr(g_out, "\"seed\":0,") && strstr(g_out, "\"version\":\""), "%s", g_out);
    char *ss = slurp_text(tp("s.npz.json"));
    expect_member(ss, "cmd", "mala eval fid --save-stats");
    expect_member(ss, "model_sha256", model);
    expect_member(ss, "sampler", "ddpm");
    expect_member(ss, "preset", "custom");
    expect_member(ss, "features_sha256", cls);
    ck_assert_msg(strstr(ss, "\"num\":4,") && strstr(ss, "\"n\":4"), "%s", ss);
    free(ss);
    RUN_OK("info %s", tp("ref.npz"));
    ck_assert_msg(strstr(g_out, "arrays: mu, sigma") && strstr(g_out, cls), "%s", g_out);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("manifest");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sample_manifest);
    tcase_add_test(tc, test_eval_manifest);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
