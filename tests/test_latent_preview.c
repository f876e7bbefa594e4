// A latent model's step preview (pipeline/latent_preview.h, generator_preview): the projection's
// math on a hand-made latent with the SD-VAE's published factors, and on a latent model with the
// tiny VAE (tests/fixtures/vae_tiny.safetensors): the decoded size, the same pixels twice, no VAE
// pass after the one-time fit, and the fit's colours against held-out decodes.
#include <math.h>

#include "model/vae.h"
#include "pipeline/generate.h"
#include "core/rng.h"
#include "testutil.h"

#define VAE "tests/fixtures/vae_tiny.safetensors"

static float clamp1(float v) { return v < -1 ? -1 : v > 1 ? 1 : v; }

// SD factors on a 2x3 grid of 4 channels, scale 2: every pixel of cell (y, x)'s 8x8 block is
// clamp(b + sum_c w[o][c] * 2 z[c]), computed here from the factors as data.
START_TEST(sd_projection_math) {
    LatentProj p;
    latent_proj_sd(&p);
    ck_assert_int_eq(p.cin, 4);
    ck_assert_int_eq(p.cout, 3);
    ck_assert_int_eq(p.factor, 8);
    ck_assert_float_eq(p.w[0][0], 0.3512f);  // R from channel 0 (ComfyUI's SD15 table)
    ck_assert_float_eq(p.w[2][3], -0.7177f);  // B from channel 3
    enum { H = 2, W = 3 };
    float z[4 * H * W];
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < H * W; i++) z[c * H * W + i] = 0.25f * (float)(c + 1) * (float)(i - 2);  // some cells saturate
    float out[3 * 16 * 24];
    latent_proj_apply(&p, z, 1, H, W, 2.0f, out);
    int clamped = 0;
    for (int o = 0; o < 3; o++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                float v = p.b[o];
                for (int c = 0; c < 4; c++) v += p.w[o][c] * 2.0f * z[c * H * W + y * W + x];
                clamped += fabsf(v) > 1;
                for (int py = 0; py < 8; py++)
                    for (int px = 0; px < 8; px++)
                        ck_assert_float_eq_tol(out[o * 16 * 24 + (y * 8 + py) * 24 + x * 8 + px], clamp1(v), 1e-6f);
            }
    ck_assert_msg(clamped > 0, "the latent was meant to saturate some cells");
}
END_TEST

// A 4x4x4 latent model over the tiny VAE (32x32 RGB): previews without a decode.
START_TEST(generator_preview_tiny_vae) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 1; c.dit.hidden = 32; c.dit.heads = 2; c.dit.patch = 2;
    c.image_size = 4; c.in_channels = 4; c.num_classes = 2; c.latent_scale = 0.18215f;
    ClassNames cn;
    class_names_default(&cn, 2);
    Generator g;
    generator_new(&g, &c, &cn, backend_cpu(), 2);
    class_names_free(&cn);
    MalaErr err;
    ck_assert_msg(generator_attach_vae(&g, VAE, "model", &err) == 0, "%s", err.msg);
    const int S = generator_out_size(&g), OC = generator_out_channels(&g);
    const size_t per = generator_image_floats(&g), oper = generator_out_floats(&g);
    ck_assert_int_eq(S, 4 * vae_factor(vae_config(g.vae)));
    ck_assert_int_eq((int)oper, OC * S * S);
    float *x = malloc(2 * per * sizeof(float)), *a = malloc(2 * oper * sizeof(float)), *b = malloc(2 * oper * sizeof(float));
    Rng r;
    rng_seed(&r, 5);
    rng_normal_fill(&r, x, 2 * per);
    for (size_t i = 0; i < 2 * per; i++) x[i] *= c.latent_scale / vae_config(g.vae)->scale;  // as the model samples
    ck_assert_msg(generator_preview(&g, x, 2, a, &err) == 0, "%s", err.msg);
    const long fit = g.vae_decodes;  // the tiny VAE is no SD-VAE: its projection is fitted once
    ck_assert_msg(fit > 0, "the fit decoded nothing");
    for (int k = 0; k < 3; k++) ck_assert_msg(generator_preview(&g, x, 2, b, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(g.vae_decodes, fit);  // later previews: no VAE pass
    ck_assert_msg(!memcmp(a, b, 2 * oper * sizeof(float)), "two previews of one latent differ");
    float *want = malloc(2 * oper * sizeof(float));
    latent_proj_apply(&g.proj, x, 2, 4, 4, vae_config(g.vae)->scale / c.latent_scale, want);
    ck_assert_msg(!memcmp(a, want, 2 * oper * sizeof(float)), "the preview is not the projection");
    for (size_t i = 0; i < 2 * oper; i++) ck_assert(a[i] >= -1 && a[i] <= 1);
    // held out: the decoded images' f x f block means against the preview, over the spread of the means
    float *dec = malloc(2 * oper * sizeof(float));
    ck_assert_msg(generator_decode(&g, x, 2, dec, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(g.vae_decodes, fit + 1);
    const int f = S / 4;
    double sse = 0, sum = 0, sum2 = 0;
    int cells = 0;
    for (int i = 0; i < 2; i++)
        for (int o = 0; o < OC; o++)
            for (int cy = 0; cy < 4; cy++)
                for (int cx = 0; cx < 4; cx++) {
                    double m = 0;
                    for (int py = 0; py < f; py++)
                        for (int px = 0; px < f; px++)
                            m += clamp1(dec[i * oper + ((size_t)o * S + cy * f + py) * S + cx * f + px]);
                    m /= f * f;
                    double d = a[i * oper + ((size_t)o * S + cy * f) * S + cx * f] - m;
                    sse += d * d;
                    sum += m;
                    sum2 += m * m;
                    cells++;
                }
    const double sst = sum2 - sum * sum / cells;
    fprintf(stderr, "latent preview fit (tiny VAE): R^2 per channel %.3f %.3f %.3f on the fit's latents; held out, all channels: %.3f\n",
            g.proj.r2[0], g.proj.r2[1], g.proj.r2[2], 1 - sse / sst);
    ck_assert_msg(sse < sst, "the projection predicts held-out decodes worse than their mean (R^2 %.3f)", 1 - sse / sst);
    free(x); free(a); free(b); free(want); free(dec);
    generator_close(&g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("latent_preview");
    TCase *tc = tcase_create("latent_preview");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sd_projection_math);
    tcase_add_test(tc, generator_preview_tiny_vae);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
