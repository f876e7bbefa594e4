// Image-to-image (SDEdit), inpainting (RePaint) and class blends (docs/sample.md
// "Image-to-image, inpainting and class blends"):
//   a. the class blend on every backbone (model/label_blend.c): w = 0 is class a and w = 1 class b
//      bit for bit, the null label's output unchanged, w = 0.5 neither;
//   b. the generator on tests/fixtures/sample_model.safetensors: strength 1 equals plain
//      generation bit for bit (each sampler), a small strength stays close to the input, inpainting
//      keeps the unmasked pixels exactly (the last merge puts the input itself there) with and
//      without jumps, for DDPM, DDIM and DPM-Solver++;
//   c. a latent model (random DiT on 4x4x4 latents) through the tiny VAE fixture: the input is
//      encoded, strength 1 equals plain generation, an all-keep mask returns the encoded input
//      whatever the seed, and the mask reaches the latent grid by max pooling;
//   d. mala sample's flags and refusals, and the PNG parameters they write.
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/cpu_threads.h"
#include "formats/image_io.h"
#include "formats/npy.h"
#include "formats/png_text.h"
#include "pipeline/generate.h"
#include "pipeline/gen_inputs.h"
#include "testutil.h"
#include "testcli.h"   // defines: run, g_out, g_err, mala_bin

#define MODEL "tests/fixtures/sample_model.safetensors"  // 8x8x1, classes circle, square, ring
#define VAE "tests/fixtures/vae_tiny.safetensors"        // 32 px <-> 4x4x4

#define RUN_FAILS(needle, ...) do { int rc_ = run(__VA_ARGS__); \
    ck_assert_msg(rc_ == 1 || rc_ == 2, "exit %d (expected an error):\n%s", rc_, g_err); \
    ck_assert_msg(!strncmp(g_err, "error: ", 7) && strstr(g_err, needle), "message lacks '%s':\n%s", needle, g_err); \
} while (0)

// ---- a. the blend hook, on every backbone ----

static void blend_on(const char *preset) {
    NetConfig c;
    MalaErr err;
    net_config_default(&c, BACKBONE_DIT);
    ck_assert_msg(net_config_preset(&c, preset, &err) == 0, "%s", err.msg);
    c.num_classes = 5;
    Net *n = net_create(&c, backend_cpu(), 4, NET_INFER);
    tu_fill(n->w, n->n_floats, -0.2f, 0.2f, 7);  // random everywhere: the zero-initialised outputs would hide a label
    const size_t per = (size_t)c.in_channels * c.image_size * c.image_size, po = per * n->out_channels / c.in_channels;
    float *x = malloc(4 * per * sizeof(float)), t[4] = {500, 500, 500, 500};
    float *ref = malloc(4 * po * sizeof(float)), *out = malloc(4 * po * sizeof(float));
    tu_fill(x, per, -1, 1, 3);
    for (int i = 1; i < 4; i++) memcpy(x + i * per, x, per * sizeof(float));
    int32_t plain[4] = {1, 3, 5, 5}, any[4] = {0, 0, 5, 2};  // 5: the null class
    net_forward(n, ref, x, t, plain, 4);
    ck_assert(net_set_label_blend(n, 1, 3, 0.0f, &err) == 0);
    net_forward(n, out, x, t, any, 4);  // under a blend every conditional label is the blend
    ck_assert_msg(!memcmp(out, ref, po * sizeof(float)), "%s: w = 0 is not class a", preset);
    ck_assert_msg(!memcmp(out + 2 * po, ref + 2 * po, po * sizeof(float)), "%s: the null row changed", preset);
    ck_assert(net_set_label_blend(n, 1, 3, 1.0f, &err) == 0);
    net_forward(n, out, x, t, any, 4);
    ck_assert_msg(!memcmp(out, ref + po, po * sizeof(float)), "%s: w = 1 is not class b", preset);
    ck_assert(net_set_label_blend(n, 1, 3, 0.5f, &err) == 0);
    net_forward(n, out, x, t, any, 4);
    ck_assert(memcmp(out, ref, po * sizeof(float)) && memcmp(out, ref + po, po * sizeof(float)));
    ck_assert(!memcmp(out + 2 * po, ref + 2 * po, po * sizeof(float)));
    ck_assert(!memcmp(out + 3 * po, out, po * sizeof(float)));  // label 2 embeds as the blend too
    net_clear_label_blend(n);
    net_forward(n, out, x, t, plain, 4);
    ck_assert(!memcmp(out, ref, 4 * po * sizeof(float)));
    ck_assert(net_set_label_blend(n, 1, 5, 0.5f, &err) != 0 && strstr(err.msg, "classes 0..4"));
    ck_assert(net_set_label_blend(n, 1, 2, 1.5f, &err) != 0 && strstr(err.msg, "[0, 1]"));
    net_free(n);
    free(x);
    free(ref);
    free(out);
}

START_TEST(test_blend_backbones) {
    set_threads(1);
    blend_on("DiT-T/4");
    blend_on("DiG-T/4");
    blend_on("DiC-T");
}
END_TEST

// ---- b. the generator on a pixel model ----

enum { N = 3, S = 8, PER = S * S };

static void sample(Generator *g, GenOpts *o, const GenInit *in, float *x, uint64_t seed) {
    MalaErr err;
    int32_t y[N] = {0, 1, 2};
    generator_noise(g, x, seed, 0, N);
    ck_assert_msg(generator_run_init(g, o, in, x, y, N, seed, 0, NULL, NULL, &err) == 0, "%s", err.msg);
}

START_TEST(test_generator_init) {
    set_threads(1);
    Generator g;
    MalaErr err;
    ck_assert_msg(generator_open(&g, MODEL, backend_cpu(), N, &err) == 0, "%s", err.msg);
    float img[N * PER], a[N * PER], b[N * PER], mask[N * PER];
    for (int i = 0; i < N * PER; i++) img[i] = (i / S) % 2 ? 0.8f : -0.6f;  // stripes
    for (int k = 0; k < SAMPLER_KIND_COUNT; k++) {
        GenOpts o = gen_opts_default();
        o.kind = (SamplerKind)k;
        o.steps = 10;
        o.cfg_scale = 2.0f;
        sample(&g, &o, NULL, a, 4);
        GenInit in = {.image = img, .strength = 1.0f};
        sample(&g, &o, &in, b, 4);
        ck_assert_msg(!memcmp(a, b, sizeof a), "%s: strength 1 differs from plain generation", sampler_kind_name(o.kind));
        in.strength = 0.1f;  // one step from t = 99: the output stays near the input
        sample(&g, &o, &in, b, 4);
        double d = 0, d_plain = 0;  // mean absolute differences from the input
        for (int i = 0; i < N * PER; i++) {
            d += fabs(b[i] - img[i]) / (N * PER);
            d_plain += fabs(a[i] - img[i]) / (N * PER);
        }
        ck_assert_msg(d < 0.5 * d_plain, "%s: strength 0.1 moved the input by %g on average (plain generation %g)",
                      sampler_kind_name(o.kind), d, d_plain);
        fprintf(stderr, "%s: strength 0.1: mean |x - input| %.4f, plain generation %.4f\n", sampler_kind_name(o.kind),
                d, d_plain);
        // inpainting: the left half regenerated, the right half kept exactly
        for (int i = 0; i < N * PER; i++) mask[i] = i % S < S / 2 ? 1.0f : 0.0f;
        for (int r = 0; r <= (k == SAMPLER_DPMPP_2M ? 0 : 2); r += 2) {
            GenInit ip = {.image = img, .strength = 1.0f, .mask = mask, .resample = r};
            sample(&g, &o, &ip, b, 9);
            double kept = 0, changed = 0;
            for (int i = 0; i < N * PER; i++) {
                if (mask[i] == 0.0f) kept = fmax(kept, fabs(b[i] - img[i]));
                else changed = fmax(changed, fabs(b[i] - img[i]));
            }
            ck_assert_msg(kept == 0.0, "%s resample %d: kept pixels moved by %g", sampler_kind_name(o.kind), r, kept);
            ck_assert_msg(changed > 0.1, "%s: the masked half did not change", sampler_kind_name(o.kind));
        }
    }
    // refusals
    GenOpts o = gen_opts_default();
    o.steps = 4;
    o.kind = SAMPLER_DPMPP_2M;
    int32_t y[N] = {0, 1, 2};
    GenInit bad = {.image = img, .strength = 1.0f, .mask = mask, .resample = 1};
    ck_assert(generator_run_init(&g, &o, &bad, a, y, N, 1, 0, NULL, NULL, &err) != 0 && strstr(err.msg, "ddpm or ddim"));
    bad = (GenInit){.image = img, .strength = 0.0f};
    ck_assert(generator_run_init(&g, &o, &bad, a, y, N, 1, 0, NULL, NULL, &err) != 0 && strstr(err.msg, "(0, 1]"));
    ck_assert_int_eq(gen_init_steps(0.5f, 10), 5);
    ck_assert_int_eq(gen_init_steps(0.01f, 10), 1);
    ck_assert_int_eq(gen_init_steps(0.75f, 250), 188);  // 187.5 rounds up
    generator_close(&g);
}
END_TEST

// ---- c. a latent model through the tiny VAE ----

START_TEST(test_latent_init) {
    set_threads(2);
    NetConfig c;
    MalaErr err;
    net_config_default(&c, BACKBONE_DIT);
    ck_assert(net_config_preset(&c, "DiT-T/2", &err) == 0);
    c.in_channels = 4;
    c.image_size = 4;
    c.num_classes = 3;
    c.latent_scale = 0.18215f;
    ClassNames cn = {0};
    Generator g;
    generator_new(&g, &c, &cn, backend_cpu(), 2);
    tu_fill(g.net->w, g.net->n_floats, -0.1f, 0.1f, 5);
    ck_assert_msg(generator_attach_vae(&g, VAE, "latent", &err) == 0, "%s", err.msg);
    ck_assert_int_eq(generator_out_size(&g), 32);
    const size_t oper = generator_out_floats(&g), per = generator_image_floats(&g);
    float *pix = malloc(2 * oper * sizeof(float)), *z = malloc(2 * per * sizeof(float));
    float *a = malloc(2 * per * sizeof(float)), *b = malloc(2 * per * sizeof(float));
    tu_fill(pix, 2 * oper, -1, 1, 11);
    ck_assert_msg(generator_encode(&g, pix, 2, z, &err) == 0, "%s", err.msg);
    GenOpts o = gen_opts_default();
    o.steps = 5;
    o.kind = SAMPLER_DDIM;
    int32_t y[2] = {0, 2};
    generator_noise(&g, a, 3, 0, 2);
    ck_assert(generator_run(&g, &o, a, y, 2, 3, 0, NULL, NULL, &err) == 0);
    GenInit in = {.image = z, .strength = 1.0f};
    generator_noise(&g, b, 3, 0, 2);
    ck_assert(generator_run_init(&g, &o, &in, b, y, 2, 3, 0, NULL, NULL, &err) == 0);
    ck_assert_msg(!memcmp(a, b, 2 * per * sizeof(float)), "latent: strength 1 differs from plain generation");
    // an all-keep mask gives back the encoded input, whatever the seed
    float pm[2 * 32 * 32] = {0}, gm[2 * 16];
    generator_mask_to_grid(&g, pm, 2, gm);
    in.mask = gm;
    generator_noise(&g, b, 8, 0, 2);
    ck_assert(generator_run_init(&g, &o, &in, b, y, 2, 8, 0, NULL, NULL, &err) == 0);
    ck_assert(!memcmp(b, z, 2 * per * sizeof(float)));
    // the mask on the latent grid: one white pixel makes its 8x8 cell regenerate
    pm[(size_t)32 * 32 + 9 * 32 + 30] = 1.0f;  // image 1, row 9, column 30 -> cell (1, 3)
    generator_mask_to_grid(&g, pm, 2, gm);
    for (int i = 0; i < 32; i++) ck_assert(gm[i] == (i == 16 + 1 * 4 + 3 ? 1.0f : 0.0f));
    free(pix); free(z); free(a); free(b);
    generator_close(&g);
}
END_TEST

// ---- d. mala sample ----

// A 8x8 gray PNG: value(x, y).
static void write_png(const char *path, int side, int (*value)(int x, int y)) {
    uint8_t px[64 * 64];
    for (int y = 0; y < side; y++)
        for (int x = 0; x < side; x++) px[y * side + x] = (uint8_t)value(x, y);
    MalaErr err;
    ck_assert_msg(image_write_png(path, px, side, side, 1, &err) == 0, "%s", err.msg);
}
static int stripes(int x, int y) { return y % 2 ? 230 : 40; }
static int top_white(int x, int y) { return y < 4 ? 255 : 0; }
static int black(int x, int y) { return 0; }

static float *load_npy(const char *path, size_t *n) {
    NpyArray a;
    MalaErr err;
    ck_assert_msg(npy_load(path, &a, &err) == 0, "%s", err.msg);
    *n = (size_t)a.shape[0] * a.shape[1] * a.shape[2] * a.shape[3];
    float *x = malloc(*n * sizeof(float));
    memcpy(x, a.data, *n * sizeof(float));
    npy_free(&a);
    return x;
}

START_TEST(test_sample_flags) {
    tu_make_tmpdir("img2img");
    write_png(tp("in.png"), 8, stripes);
    write_png(tp("mask.png"), 8, top_white);
    mkdir(tp("dir"), 0755);
    write_png(tp("dir/a.png"), 8, stripes);
    write_png(tp("dir/b.png"), 16, top_white);  // another size: center-cropped
#define COMMON "sample --ckpt " MODEL " --class square --sampler ddim --steps 6 --seed 2 --threads 1 --force"
    RUN_OK(COMMON " --n 2 --save-npy %s", tp("plain.npy"));
    RUN_OK(COMMON " --n 2 --init-image %s --strength 1 --save-npy %s", tp("in.png"), tp("s1.npy"));
    size_t na, nb;
    float *a = load_npy(tp("plain.npy"), &na), *b = load_npy(tp("s1.npy"), &nb);
    ck_assert(na == nb && !memcmp(a, b, na * sizeof(float)));
    free(b);
    // inpainting: the bottom half (black in the mask) is the input's, exactly
    RUN_OK(COMMON " --init-image %s --mask %s --resample 1 --save-npy %s --out %s", tp("in.png"), tp("mask.png"),
           tp("inp.npy"), tp("inp.png"));
    float in[64];
    MalaErr err;
    ck_assert(gen_load_image(tp("in.png"), 1, 8, in, &err) == 0);
    b = load_npy(tp("inp.npy"), &nb);
    ck_assert_int_eq(nb, 64);  // one input file, no --n: one image
    for (int i = 32; i < 64; i++) ck_assert_msg(b[i] == in[i], "pixel %d: %g, the input %g", i, b[i], in[i]);
    free(b);
    free(a);
    size_t len;
    char *png = tu_read_file(tp("inp.png"), &len), *text;
    ck_assert(png_text_find((uint8_t *)png, len, "inp.png", "parameters", &text, &err) == 1);
    ck_assert_msg(strstr(text, "Denoising strength: 1, Init image: in.png, Mask: mask.png, Resample: 1,"), "%s", text);
    free(text);
    free(png);
    // a folder: one output per image
    RUN_OK(COMMON " --init-image %s --strength 0.5 --out-dir %s", tp("dir"), tp("outs"));
    // each output named after its input, and its PNG records that input's file, not the folder
    ck_assert(access(tp("outs/000000_square_a.png"), F_OK) == 0 && access(tp("outs/000001_square_b.png"), F_OK) == 0);
    png = tu_read_file(tp("outs/000001_square_b.png"), &len);
    ck_assert(png_text_find((uint8_t *)png, len, "b", "parameters", &text, &err) == 1);
    ck_assert_msg(strstr(text, "Init image: b.png,"), "%s", text);
    free(text);
    free(png);
    RUN_OK("sample --ckpt " MODEL " --blend circle,ring,0.3 --n 2 --steps 2 --threads 1 --out %s", tp("bl.png"));
    png = tu_read_file(tp("bl.png"), &len);
    ck_assert(png_text_find((uint8_t *)png, len, "bl.png", "parameters", &text, &err) == 1);
    ck_assert_msg(strstr(text, "Blend: \"0,2,0.3\""), "%s", text);
    // the prompt line is the blend as --blend takes it, and no single class is claimed
    ck_assert_msg(!strncmp(text, "circle,ring,0.3\n", 16) && !strstr(text, "Class:"), "%s", text);
    free(text);
    free(png);
    // masks: all black is refused; another size of the same aspect is said; another aspect refused;
    // an RGBA mask's alpha is said to be ignored
    write_png(tp("black.png"), 8, black);
    RUN_FAILS("all black", COMMON " --init-image %s --mask %s --out %s", tp("in.png"), tp("black.png"), tp("x.png"));
    ck_assert(access(tp("x.png"), F_OK) != 0);
    write_png(tp("mask16.png"), 16, top_white);
    RUN_OK(COMMON " --init-image %s --mask %s --out %s", tp("in.png"), tp("mask16.png"), tp("m16.png"));
    ck_assert_msg(strstr(g_err, "--mask") && strstr(g_err, "is 16x16") && strstr(g_err, "8x8") &&
                  strstr(g_err, "center_crop_arr"), "%s", g_err);
    {
        uint8_t px[8 * 4 * 4] = {0};
        for (int i = 0; i < 8 * 4; i++) px[4 * i] = px[4 * i + 1] = px[4 * i + 2] = px[4 * i + 3] = i < 8 ? 255 : 0;
        ck_assert(image_write_png(tp("tall.png"), px, 4, 8, 4, &err) == 0);  // 4 wide, 8 high, RGBA
        RUN_FAILS("another aspect ratio", COMMON " --init-image %s --mask %s --out %s", tp("in.png"), tp("tall.png"),
                  tp("x.png"));
        uint8_t rgba[8 * 8 * 4];
        for (int i = 0; i < 64; i++) rgba[4 * i] = rgba[4 * i + 1] = rgba[4 * i + 2] = i < 32 ? 255 : 0, rgba[4 * i + 3] = 128;
        ck_assert(image_write_png(tp("rgba.png"), rgba, 8, 8, 4, &err) == 0);
        RUN_OK(COMMON " --init-image %s --mask %s --out %s", tp("in.png"), tp("rgba.png"), tp("ma.png"));
        ck_assert_msg(strstr(g_err, "alpha channel, which is ignored"), "%s", g_err);
    }
    // refusals, one line each
    RUN_FAILS("--mask: needs --init-image", COMMON " --mask %s --out %s", tp("mask.png"), tp("x.png"));
    RUN_FAILS("--strength: needs --init-image", COMMON " --strength 0.5 --out %s", tp("x.png"));
    RUN_FAILS("--resample: applies to inpainting", COMMON " --init-image %s --resample 2 --out %s", tp("in.png"),
              tp("x.png"));
    RUN_FAILS("ddpm or ddim", "sample --ckpt " MODEL " --sampler dpm++2m --steps 3 --init-image %s --mask %s "
              "--resample 1 --out %s", tp("in.png"), tp("mask.png"), tp("x.png"));
    RUN_FAILS("--n asks for 3 images: --init-image", COMMON " --n 3 --init-image %s --out %s", tp("dir"), tp("x.png"));
    RUN_FAILS("no such file", COMMON " --init-image %s --out %s", tp("none.png"), tp("x.png"));
    RUN_FAILS("--strength 0", COMMON " --init-image %s --strength 0 --out %s", tp("in.png"), tp("x.png"));
    RUN_FAILS("unknown class 'boat'", "sample --ckpt " MODEL " --blend circle,boat,0.5 --out %s", tp("x.png"));
    RUN_FAILS("[0, 1]", "sample --ckpt " MODEL " --blend circle,ring,2 --out %s", tp("x.png"));
    RUN_FAILS("drop --class", COMMON " --blend circle,ring,0.5 --out %s", tp("x.png"));
#undef COMMON
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("img2img");
    TCase *tc = tcase_create("img2img");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_blend_backbones);
    tcase_add_test(tc, test_generator_init);
    tcase_add_test(tc, test_latent_init);
    tcase_add_test(tc, test_sample_flags);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
