// defines: gen_init_steps, gen_init_prepare, generator_encode, generator_mask_to_grid
//
// Image-to-image (SDEdit, Meng et al. 2022) and inpainting (RePaint, Lugmayr et al. 2022) on the
// generator (pipeline/generate.h, GenInit); the sampler does the per-step work (sampler/inpaint.c).
#include <math.h>
#include <string.h>

#include "pipeline/generate.h"
#include "model/vae.h"

int gen_init_steps(float strength, int N) {
    int k = (int)floor((double)strength * N + 0.5);
    return k < 1 ? 1 : k > N ? N : k;
}

// Inpainting's extra draws: one stream per (image, step) as the step noise, under seeds of their own.
static void init_draw(void *ctx, float *out, size_t count, int step, int draw) {
    Generator *g = ctx;
    size_t per = generator_image_floats(g);
    g->net->be->rand_normal(out, (int)(count / per), per, g->noise_seed ^ (0xd1b54a32d192ed03ull * (uint64_t)draw),
                            (uint64_t)g->noise_first * 1024 + (uint64_t)step, 1024);
}

static int check_init(const Generator *g, const GenOpts *o, const GenInit *in, MalaErr *err) {
    if (!in->image) return mala_errf(err, "image-to-image: no input image");
    if (!(in->strength > 0.0f && in->strength <= 1.0f))
        return mala_errf(err, "--strength %g: must be in (0, 1]", (double)in->strength);
    if (in->resample < 0 || in->resample > 100)
        return mala_errf(err, "--resample %d: must be between 0 and 100", in->resample);
    if (in->resample > 0 && !in->mask) return mala_errf(err, "--resample: applies to inpainting (--mask) only");
    if (in->resample > 0 && o->kind == SAMPLER_DPMPP_2M)
        return mala_errf(err, "--resample %d: RePaint's jumps need --sampler ddpm or ddim (dpm++2m is a multistep "
                         "solver whose history a jump would break); inpainting itself works with dpm++2m",
                         in->resample);
    return 0;
}

int gen_init_prepare(Generator *g, const GenOpts *o, const GenInit *in, float *x, int n, MalaErr *err) {
    sampler_set_init(&g->s, NULL);
    if (!in) return 0;
    if (check_init(g, o, in, err)) return -1;
    const size_t per = generator_image_floats(g), count = (size_t)n * per;
    const int N = o->steps, skip = N - gen_init_steps(in->strength, N);
    if (skip > 0) {  // q_sample to the first step taken, with the run's own noise
        const double ab = sampler_start_abar(&g->s, skip), a = sqrt(ab), s = sqrt(1.0 - ab);
        for (size_t i = 0; i < count; i++) x[i] = (float)(a * in->image[i] + s * x[i]);
    }
    SamplerInit si = {.skip = skip, .draw = init_draw, .draw_ctx = g};
    if (in->mask) {
        const Backend *be = g->net->be;
        if (!g->d_known) {  // once, at the first inpainting run: plain sampling never pays for them
            const size_t bytes = (size_t)g->max_batch * per * sizeof(float);
            g->d_known = be->alloc(bytes);
            g->d_mask = be->alloc(bytes);
            g->d_work = be->alloc(bytes);
        }
        const int C = g->net->cfg.in_channels;
        const size_t hw = per / C;
        float *m = xmalloc(count * sizeof(float));
        for (int b = 0; b < n; b++)  // the one-channel mask on every channel
            for (int c = 0; c < C; c++) memcpy(m + ((size_t)b * C + c) * hw, in->mask + (size_t)b * hw, hw * sizeof(float));
        be->to_device(g->d_mask, m, count * sizeof(float));
        be->to_device(g->d_known, in->image, count * sizeof(float));
        free(m);
        si.known = g->d_known;
        si.mask = g->d_mask;
        si.work = g->d_work;
        si.resample = in->resample;
    }
    sampler_set_init(&g->s, &si);
    return 0;
}

int generator_encode(Generator *g, const float *img, int n, float *x, MalaErr *err) {
    const NetConfig *c = &g->net->cfg;
    if (!g->vae) {
        if (c->latent_scale > 0) return mala_errf(err, "a latent model's inputs need a VAE to encode (--vae FILE)");
        if (x != img) memcpy(x, img, (size_t)n * generator_image_floats(g) * sizeof(float));
        return 0;
    }
    const int S = generator_out_size(g), cap = vae_max_batch(g->vae);
    const size_t per_in = generator_out_floats(g), per = generator_image_floats(g);
    for (int b0 = 0; b0 < n; b0 += cap) {
        int nb = n - b0 < cap ? n - b0 : cap;
        if (vae_encode(g->vae, img + per_in * b0, nb, S, S, x + per * b0, NULL, err)) return -1;
    }
    for (size_t i = 0; i < (size_t)n * per; i++) x[i] *= c->latent_scale;
    return 0;
}

void generator_mask_to_grid(const Generator *g, const float *mask, int n, float *out) {
    const int S = g->net->cfg.image_size, OS = generator_out_size(g), f = OS / S;
    if (f == 1) {
        if (out != mask) memcpy(out, mask, (size_t)n * S * S * sizeof(float));
        return;
    }
    for (int b = 0; b < n; b++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                float m = 0.0f;
                for (int i = 0; i < f; i++)
                    for (int j = 0; j < f; j++) {
                        float v = mask[((size_t)b * OS + y * f + i) * OS + x * f + j];
                        m = v > m ? v : m;
                    }
                out[((size_t)b * S + y) * S + x] = m;
            }
}
