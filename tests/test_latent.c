// Latent diffusion end to end on the tiny random VAE (tests/fixtures/vae_tiny.safetensors, 32 px
// images -> 4x4x4 latents): the latent set's format (data/latents.h) and its refusals, the
// loader's fresh z per stream position, then the commands as a user runs them: mala encode (and
// its resume), mala train --data LATENTS (bit-exact resume, the model file's latent metadata,
// grids through --vae), mala sample through --vae to PNG and the ADM .npz, and the errors of a
// latent model without --vae or a pixel model with one.
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/loader.h"
#include "core/half.h"
#include "formats/image_io.h"
#include "data/latents.h"
#include "formats/npy.h"
#include "core/rng.h"
#include "formats/safetensors.h"
#include "testutil.h"

#define VAE "tests/fixtures/vae_tiny.safetensors"
#define TINY_LATENT "--model DiT-T/2 --batch 4 --log-every 1 --threads 2"

static const char *mala_bin(void) { return getenv("MALA_BIN") ? getenv("MALA_BIN") : "./mala"; }
static char g_err[1 << 16];

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...) {
    char args[4096], cmd[5000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>%s/.stderr </dev/null", mala_bin(), args, tu_tmp);
    int st = system(cmd);
    snprintf(args, sizeof args, "%s/.stderr", tu_tmp);
    FILE *f = fopen(args, "rb");
    size_t n = f ? fread(g_err, 1, sizeof g_err - 1, f) : 0;
    if (f) fclose(f);
    g_err[n] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
#define RUN_OK(...) do { int rc_ = run(__VA_ARGS__); ck_assert_msg(rc_ == 0, "exit %d:\n%s", rc_, g_err); } while (0)
#define RUN_FAILS(needle, ...) do { int rc_ = run(__VA_ARGS__); \
    ck_assert_msg(rc_ == 1 || rc_ == 2, "exit %d (expected an error):\n%s", rc_, g_err); \
    ck_assert_msg(strstr(g_err, needle), "message lacks '%s':\n%s", needle, g_err); } while (0)

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    int same = na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(s, f);
    fclose(f);
}

// root/<class k>/<i>.png of random RGB pixels, not square (the crop has work to do).
static void make_folder(const char *root, int classes, int per_class) {
    mkdir(root, 0755);
    uint64_t s = 11;
    const int w = 40, h = 36;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int k = 0; k < classes; k++) {
        char dir[600], path[700];
        snprintf(dir, sizeof dir, "%s/class%c", root, 'a' + k);
        mkdir(dir, 0755);
        for (int i = 0; i < per_class; i++) {
            for (int j = 0; j < w * h * 3; j++) px[j] = (uint8_t)(tu_next(&s) >> 56);
            snprintf(path, sizeof path, "%s/%03d.png", dir, i);
            MalaErr err;
            ck_assert_msg(image_write_png(path, px, w, h, 3, &err) == 0, "%s", err.msg);
        }
    }
    free(px);
}

// A small float32 set written through the writer: 5 images, 2 views, [2, 3, 3] latents.
static void write_small_set(const char *dir, int f16, float *mean, float *logvar) {
    LatentManifest m = {0};
    m.count = 5, m.views = 2, m.c = 2, m.h = m.w = 3, m.f16 = f16, m.image_size = 24, m.scale = 0.5f;
    m.num_classes = 2, m.shard_images = 2;
    snprintf(m.crop, sizeof m.crop, "adm_center_crop_arr");
    snprintf(m.vae_file, sizeof m.vae_file, "v.safetensors");
    snprintf(m.source, sizeof m.source, "imgs");
    const size_t per = latent_row_values(&m);
    tu_fill(mean, 5 * per, -2, 2, 1);
    tu_fill(logvar, 5 * per, -4, 1, 2);
    char *names[2] = {"cat", "dog"};
    int32_t labels[5] = {0, 0, 1, 1, 1};
    LatentWriter w;
    MalaErr err;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
    mkdir(dir, 0755);
    ck_assert_msg(latent_writer_open(&w, dir, &m, names, labels, &err) == 0, "%s", err.msg);
    for (int s = 0; s < 3; s++) {
        int64_t r0 = 2 * s, n = r0 + 2 <= 5 ? 2 : 1;
        ck_assert_msg(latent_writer_put(&w, r0, n, mean + r0 * per, logvar + r0 * per, &err) == 0, "%s", err.msg);
        ck_assert_msg(latent_writer_commit(&w, s + 1, &err) == 0, "%s", err.msg);
    }
    ck_assert(w.m.complete);
    latent_writer_close(&w);
}

START_TEST(test_format_and_draw) {
    tu_make_tmpdir("latent");
    float mean[5 * 36], logvar[5 * 36];
    for (int f16 = 0; f16 < 2; f16++) {
        const char *dir = tp(f16 ? "f16" : "f32");
        write_small_set(dir, f16, mean, logvar);
        LatentSet s;
        MalaErr err;
        ck_assert_msg(latent_set_open(&s, dir, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(s.rows, 5);
        ck_assert_str_eq(s.class_names[1], "dog");
        ck_assert_int_eq(s.labels[4], 1);
        // z = (mean + exp(logvar / 2) eps) * scale, eps = Philox stream 7 under seed 3; row 3, view 1
        float z[18], eps[18];
        latent_set_draw(&s, 3, 1, 1, 3, 7, z);
        Rng r;
        rng_seed_stream(&r, 3, 7);
        rng_normal_fill(&r, eps, 18);
        for (int i = 0; i < 18; i++) {
            float m = mean[3 * 36 + 18 + i], lv = logvar[3 * 36 + 18 + i];
            if (f16) m = half_to_f32(f32_to_half(m)), lv = half_to_f32(f32_to_half(lv));
            float want = (m + expf(0.5f * lv) * eps[i]) * 0.5f;
            ck_assert_msg(fabsf(z[i] - want) <= 1e-6f * (1 + fabsf(want)), "f16 %d value %d: %g vs %g", f16, i, z[i], want);
        }
        latent_set_close(&s);
    }
    // refusals name the file and the problem
    const char *dir = tp("f32");
    MalaErr err;
    LatentSet s;
    char path[600];
    snprintf(path, sizeof path, "%s/mean.npy", dir);
    ck_assert(truncate(path, 200) == 0);
    ck_assert(latent_set_open(&s, dir, &err) != 0);
    ck_assert_msg(strstr(err.msg, "mean.npy") && strstr(err.msg, "mismatch"), "%s", err.msg);
    write_small_set(dir, 0, mean, logvar);
    snprintf(path, sizeof path, "%s/class_names.json", dir);
    write_text(path, "[\"cat\"]");
    ck_assert(latent_set_open(&s, dir, &err) != 0);
    ck_assert_msg(strstr(err.msg, "class_names.json") && strstr(err.msg, "2 class names"), "%s", err.msg);
    write_small_set(dir, 0, mean, logvar);
    snprintf(path, sizeof path, "%s/labels.npy", dir);
    NpyArray a;
    int32_t bad[5] = {0, 1, 2, 0, 0};
    npy_wrap(&a, "<i4", bad, 1, (int64_t[]){5});
    ck_assert(npy_save(path, &a, &err) == 0);
    ck_assert(latent_set_open(&s, dir, &err) != 0);
    ck_assert_msg(strstr(err.msg, "labels.npy") && strstr(err.msg, "outside 0..1"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/latents.json", dir);
    write_text(path, "{\"format\": \"mala-latents\", \"version\": 1, \"count\": -3}");
    ck_assert(latent_set_open(&s, dir, &err) != 0);
    ck_assert_msg(strstr(err.msg, "latents.json") && strstr(err.msg, "'count'"), "%s", err.msg);
    tu_rm_tmpdir();
}
END_TEST

// The loader's position p of a latent set is the draw of stream p: a fresh z per use, and the same
// after a seek (what bit-exact resume rests on).
START_TEST(test_loader_draws) {
    tu_make_tmpdir("latent");
    float mean[5 * 36], logvar[5 * 36];
    write_small_set(tp("set"), 0, mean, logvar);
    MalaErr err;
    Dataset *d = dataset_open(tp("set"), 0, 0, &err);
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_int_eq(d->channels, 2);
    ck_assert_int_eq(d->image_size, 3);
    ck_assert_int_eq(d->views, 2);
    ck_assert(dataset_open(tp("set"), 8, 0, &err) == NULL && strstr(err.msg, "--image-size 8"));
    LatentSet s;
    ck_assert(latent_set_open(&s, tp("set"), &err) == 0);
    Loader *l = loader_new(d, 2, 9, 1, &err);
    float x[10][36], want[18];
    int32_t y[2];
    for (int k = 0; k < 10; k++) loader_next(l, x[k], y);
    for (int k = 0; k < 10; k++)
        for (int b = 0; b < 2; b++) {
            uint64_t p = 2 * (uint64_t)k + b;
            int flip;
            int64_t i = loader_sample_at(l, p, &flip);
            latent_set_draw(&s, i, flip, 1, 9 ^ LOADER_LATENT_KEY, p, want);
            ck_assert_msg(!memcmp(x[k] + 18 * b, want, sizeof want), "batch %d image %d", k, b);
        }
    // 20 positions over 5 images x 2 views: some (image, view) comes twice, with another z
    int pairs = 0;
    for (uint64_t p = 0; p < 20; p++)
        for (uint64_t q = p + 1; q < 20; q++) {
            int fp, fq;
            if (loader_sample_at(l, p, &fp) != loader_sample_at(l, q, &fq) || fp != fq) continue;
            pairs++;
            ck_assert_msg(memcmp(x[p / 2] + 18 * (p % 2), x[q / 2] + 18 * (q % 2), sizeof want), "positions %d, %d",
                          (int)p, (int)q);
        }
    ck_assert_int_gt(pairs, 0);
    loader_seek(l, 2);
    float again[36];
    loader_next(l, again, y);
    ck_assert(!memcmp(again, x[2], sizeof again));
    loader_free(l);
    latent_set_close(&s);
    dataset_close(d);
    tu_rm_tmpdir();
}
END_TEST

static int64_t npy_dim(const char *path, int d, char *dtype) {
    NpyArray a;
    MalaErr err;
    ck_assert_msg(npy_load(path, &a, &err) == 0, "%s", err.msg);
    int64_t v = a.shape[d];
    if (dtype) snprintf(dtype, 8, "%s", a.dtype);
    npy_free(&a);
    return v;
}

START_TEST(test_encode_train_sample) {
    tu_make_tmpdir("latent");
    make_folder(tp("imgs"), 2, 4);
    // encode with flips in shards of 3; the same bytes when a stop is simulated after shard 1
    RUN_OK("encode --data %s --vae " VAE " --image-size 32 --hflip --dtype f32 --shard 3 --out %s --threads 2",
           tp("imgs"), tp("lat"));
    ck_assert_msg(strstr(g_err, "8 images") && strstr(g_err, "per image"), "%s", g_err);
    char dtype[8];
    ck_assert_int_eq(npy_dim(tp("lat/mean.npy"), 0, dtype), 8);
    ck_assert_str_eq(dtype, "<f4");
    ck_assert_int_eq(npy_dim(tp("lat/logvar.npy"), 1, NULL), 2);
    ck_assert_int_eq(npy_dim(tp("lat/mean.npy"), 4, NULL), 4);
    // view 0 is what `mala vae encode` gives for the same crops
    RUN_OK("vae encode --vae " VAE " --in %s --image-size 32 --out %s --threads 2", tp("imgs"), tp("ref.npz"));
    NpyArray ref, ours;
    MalaErr err;
    ck_assert(npz_load(tp("ref.npz"), "mean", &ref, &err) == 0);
    ck_assert(npy_load(tp("lat/mean.npy"), &ours, &err) == 0);
    const float *r = ref.data, *o = ours.data;
    for (int i = 0; i < 8; i++)
        ck_assert_msg(tu_nerr(o + i * 128, r + i * 64, 64, 1e-3) < 1e-5, "image %d", i);
    ck_assert(memcmp(o + 64, o, 64 * sizeof(float)));  // view 1 (the mirror) differs
    npy_free(&ref);
    npy_free(&ours);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp -r %s %s && sed -i 's/\"shards_done\": 3, \"complete\": true/\"shards_done\": 1, "
             "\"complete\": false/' %s/latents.json && dd if=/dev/zero of=%s/mean.npy bs=1 seek=2000 count=1000 "
             "conv=notrunc status=none", tp("lat"), tp("lat2"), tp("lat2"), tp("lat2"));
    ck_assert(system(cmd) == 0);
    RUN_OK("encode --data %s --vae " VAE " --image-size 32 --hflip --dtype f32 --shard 3 --out %s --threads 2",
           tp("imgs"), tp("lat2"));
    ck_assert_msg(strstr(g_err, "continuing at shard 2 of 3"), "%s", g_err);
    ck_assert(same_file(tp("lat/mean.npy"), tp("lat2/mean.npy")) && same_file(tp("lat/latents.json"), tp("lat2/latents.json")));
    RUN_OK("encode --data %s --vae " VAE " --image-size 32 --out %s --threads 2", tp("imgs"), tp("lat1"));
    RUN_FAILS("views", "encode --data %s --vae " VAE " --image-size 32 --dtype f32 --shard 3 --out %s", tp("imgs"),
              tp("lat2"));

    // train 4 steps straight, and 2 + 2 with --resume: the same checkpoint bytes
    RUN_OK("train " TINY_LATENT " --data %s --iters 4 --ckpt-every 2 --sample-every 4 --out %s", tp("lat"), tp("a"));
    ck_assert_msg(strstr(g_err, "4x4x4 latents") && strstr(g_err, "no grids without --vae"), "%s", g_err);
    RUN_OK("train " TINY_LATENT " --data %s --iters 2 --ckpt-every 2 --sample-every 4 --out %s", tp("lat"), tp("b"));
    RUN_OK("train --resume --iters 4 --out %s --threads 2", tp("b"));
    ck_assert(same_file(tp("a/checkpoints/0000004.safetensors"), tp("b/checkpoints/0000004.safetensors")));
    StFile f;
    ck_assert(st_open(&f, tp("a/checkpoints/0000004.safetensors"), &err) == 0);
    ck_assert_str_eq(st_meta(&f, "latent"), "true");
    ck_assert_str_eq(st_meta(&f, "latent_scale"), "0.182150006");
    ck_assert_str_eq(st_meta(&f, "in_channels"), "4");
    ck_assert_str_eq(st_meta(&f, "image_size"), "4");
    st_close(&f);
    RUN_FAILS("one view per image", "train " TINY_LATENT " --data %s --hflip 1 --out %s", tp("lat1"), tp("x"));
    // grids decode through --vae
    RUN_OK("train " TINY_LATENT " --data %s --iters 1 --sample-every 1 --vae " VAE " --out %s", tp("lat"), tp("c"));
    int w, h;
    ck_assert(image_check(tp("c/samples/0000001.png"), &w, &h, &err) == 0);
    ck_assert_int_ge(w, 32);
    // a --vae that cannot be read fails before the run directory exists, grids or not
    RUN_FAILS("No such file", "train " TINY_LATENT " --data %s --iters 1 --sample-every 1 --vae %s --out %s", tp("lat"),
              tp("none.safetensors"), tp("d"));
    RUN_FAILS("not a safetensors", "train " TINY_LATENT " --data %s --iters 1 --sample-every 0 --vae %s --out %s",
              tp("lat"), tp("lat/latents.json"), tp("d"));
    ck_assert_msg(access(tp("d"), F_OK) != 0, "a bad --vae created the run directory");

    // sample through the VAE: a PNG grid and the ADM .npz at the decoded size
    char model[512];
    snprintf(model, sizeof model, "%s", tp("a/checkpoints/0000004.safetensors"));
    RUN_FAILS("--vae FILE", "sample --ckpt %s --n 2 --steps 2 --out %s", model, tp("x.png"));
    RUN_FAILS("pixel-space", "sample --vae " VAE " --ckpt tests/fixtures/sample_model.safetensors --n 2 --out %s",
              tp("x.png"));
    RUN_OK("sample --ckpt %s --vae " VAE " --n 3 --batch 2 --steps 3 --out %s --save-npz %s --save-npy %s --threads 2",
           model, tp("s.png"), tp("s.npz"), tp("s.npy"));
    NpyArray arr;
    ck_assert(npz_load(tp("s.npz"), "arr_0", &arr, &err) == 0);
    ck_assert_str_eq(arr.dtype, "|u1");
    ck_assert(arr.ndim == 4 && arr.shape[0] == 3 && arr.shape[1] == 32 && arr.shape[2] == 32 && arr.shape[3] == 3);
    npy_free(&arr);
    ck_assert(image_check(tp("s.png"), &w, &h, &err) == 0);
    // the .npy holds the decoded images
    ck_assert(npy_load(tp("s.npy"), &arr, &err) == 0);
    ck_assert(arr.ndim == 4 && arr.shape[1] == 3 && arr.shape[2] == 32);
    npy_free(&arr);
    // eval --ckpt and the viewer decode the same way, and refuse a latent model without --vae
    RUN_OK("eval is --ckpt %s --vae " VAE " --inception random --num 4 --sample-batch 2 --steps 2 --splits 1 "
           "--threads 2", model);
    ck_assert_msg(strstr(g_err, "4 samples"), "%s", g_err);
    // DiT's forward_with_cfg guides 3 of a 4-channel latent model's eps channels (the dit preset's
    // default, also with custom settings); --quick and --cfg-channels all guide all 4
    ck_assert_msg(strstr(g_err, "guidance 1.5 on 3 eps channels"), "%s", g_err);
    RUN_OK("eval is --ckpt %s --vae " VAE " --inception random --num 4 --sample-batch 2 --steps 2 --splits 1 "
           "--threads 2 --quick", model);
    ck_assert_msg(strstr(g_err, "on all eps channels"), "%s", g_err);
    RUN_FAILS("--vae FILE", "eval is --ckpt %s --inception random --num 2 --splits 1", model);
    RUN_FAILS("--vae FILE", "view --ckpt %s", model);
    if (system("command -v xvfb-run >/dev/null 2>&1") == 0) {
        char view[4096];
        snprintf(view, sizeof view, "ASAN_OPTIONS=detect_leaks=0 timeout 120 xvfb-run -a -s '-screen 0 1024x768x24' %s "
                 "view --ckpt %s --vae " VAE " --threads 2 --script 'n=2;steps=3;generate;wait;save=%s;quit' "
                 ">/dev/null 2>&1", mala_bin(), model, tp("v.png"));
        ck_assert(system(view) == 0);
        ck_assert(image_check(tp("v.png"), &w, &h, &err) == 0);
        // the viewer's image-to-image through the VAE: strength 1 is plain generation; a painted mask runs
        char v1[600], v2[600], img[600];
        snprintf(v1, sizeof v1, "%s", tp("v1.png"));
        snprintf(v2, sizeof v2, "%s", tp("v2.png"));
        snprintf(img, sizeof img, "%s", tp("imgs/classa/000.png"));
        snprintf(view, sizeof view, "ASAN_OPTIONS=detect_leaks=0 timeout 120 xvfb-run -a -s '-screen 0 1024x768x24' %s "
                 "view --ckpt %s --vae " VAE " --threads 2 --init-image %s --script 'n=2;steps=3;strength=1;generate;"
                 "wait;save=%s;strength=0.5;paint=8,8,4;generate;wait;save=%s;quit' >/dev/null 2>&1", mala_bin(), model,
                 img, v1, v2);
        ck_assert(system(view) == 0);
        uint8_t *a, *b;
        int w2, h2;
        ck_assert(image_load(tp("v.png"), 3, &a, &w, &h, &err) == 0);
        ck_assert(image_load(v1, 3, &b, &w2, &h2, &err) == 0);
        ck_assert_msg(w == w2 && h == h2 && !memcmp(a, b, (size_t)w * h * 3), "latent viewer: strength 1 is not plain");
        free(a);
        free(b);
        ck_assert(image_check(v2, &w, &h, &err) == 0);
    }
    // image-to-image and inpainting through the VAE: strength 1 is plain generation; a folder of
    // inputs (40x36, center-cropped) with a mask of the inputs' shape (the same crop, then
    // max-pooled to the 4x4 latent grid)
    uint8_t mask[40 * 36];
    for (int i = 0; i < 40 * 36; i++) mask[i] = i % 40 < 12 ? 255 : 0;
    ck_assert(image_write_png(tp("mask.png"), mask, 40, 36, 1, &err) == 0);
    RUN_OK("sample --ckpt %s --vae " VAE " --n 2 --steps 3 --seed 4 --save-npy %s --threads 2", model, tp("p.npy"));
    RUN_OK("sample --ckpt %s --vae " VAE " --n 2 --steps 3 --seed 4 --init-image %s --strength 1 --save-npy %s "
           "--threads 2", model, tp("imgs/classa/000.png"), tp("p1.npy"));
    ck_assert(same_file(tp("p.npy"), tp("p1.npy")));
    RUN_OK("sample --ckpt %s --vae " VAE " --steps 3 --init-image %s --strength 0.5 --mask %s --resample 1 "
           "--out-dir %s --threads 2", model, tp("imgs/classa"), tp("mask.png"), tp("inp"));
    ck_assert(image_check(tp("inp/000003_classb_003.png"), &w, &h, &err) == 0 && w == 32);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("latent");
    TCase *tc = tcase_create("latent");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_format_and_draw);
    tcase_add_test(tc, test_loader_draws);
    tcase_add_test(tc, test_encode_train_sample);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
