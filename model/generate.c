// defines: gen_opts_default, generator_open, generator_close, generator_noise, generator_run
#include "generate.h"

#include <string.h>

GenOpts gen_opts_default(void) {
    GenOpts o = {SAMPLER_DDPM, 250, 4.0f, 0.0f, 1};
    return o;
}

int generator_open(Generator *g, const char *path, const Backend *be, int max_batch, MalaErr *err) {
    memset(g, 0, sizeof *g);
    g->max_batch = max_batch;
    g->m = ckpt_load_model(path, be, 2 * max_batch, &g->classes, err);  // 2x: guided batches
    if (!g->m) return -1;
    denoiser_init(&g->dn, g->m);
    if (diffusion_init(&g->base, BETA_LINEAR, 1000, err)) return -1;
    SamplerConfig sc = sampler_config_default();
    sc.learn_sigma = g->m->cfg.learn_sigma;
    sc.num_classes = g->m->cfg.num_classes;
    if (sampler_init(&g->s, &g->base, &sc, max_batch, g->m->cfg.in_channels, g->m->cfg.image_size, denoiser_fn,
                     &g->dn, err))
        return -1;
    return 0;
}

void generator_close(Generator *g) {
    if (!g->m) return;
    sampler_free(&g->s);
    diffusion_free(&g->base);
    denoiser_free(&g->dn);
    dit_free(g->m);
    class_names_free(&g->classes);
    memset(g, 0, sizeof *g);
}

void generator_noise(const Generator *g, float *noise, uint64_t seed, int64_t first, int n) {
    size_t per = (size_t)g->m->cfg.in_channels * g->m->cfg.image_size * g->m->cfg.image_size;
    for (int i = 0; i < n; i++) {
        Rng r;
        rng_seed_stream(&r, seed, (uint64_t)(first + i));
        rng_normal_fill(&r, noise + (size_t)i * per, per);
    }
}

// Per-step noise: one Philox stream per (image, step), under a seed distinct from the initial
// noise's (generator_noise uses stream = image index under `seed`).
static void step_noise(void *ctx, float *out, size_t count, int step) {
    Generator *g = ctx;
    const DitConfig *c = &g->m->cfg;
    size_t per = (size_t)c->in_channels * c->image_size * c->image_size;
    for (size_t i = 0; i < count / per; i++) {
        Rng r;
        rng_seed_stream(&r, g->noise_seed ^ 0x9e3779b97f4a7c15ull, (uint64_t)(g->noise_first + (int64_t)i) * 1024 + step);
        rng_normal_fill(&r, out + i * per, per);
    }
}

int generator_run(Generator *g, const GenOpts *o, float *x, const int32_t *y, int n, uint64_t seed, int64_t first,
                  SamplerStepFn on_step, void *ctx, MalaErr *err) {
    int T = g->base.num_timesteps;
    if (o->steps < 1 || o->steps > T) return mala_errf(err, "--steps %d: must be between 1 and %d", o->steps, T);
    for (int i = 0; i < n; i++)
        if (y[i] < 0 || y[i] > g->m->cfg.num_classes)
            return mala_errf(err, "label %d: the model has classes 0..%d", y[i], g->m->cfg.num_classes - 1);
    if (g->s.sp.num_timesteps != o->steps && sampler_set_steps(&g->s, &g->base, o->steps, err)) return -1;
    g->s.cfg.kind = o->kind;
    g->s.cfg.cfg_scale = o->cfg_scale;
    g->s.cfg.eta = o->eta;
    g->s.cfg.clip_denoised = o->clip;
    g->noise_seed = seed;
    g->noise_first = first;
    sampler_set_noise(&g->s, step_noise, g);
    sampler_set_progress(&g->s, on_step, ctx);
    return sampler_run(&g->s, x, y, n, err);
}
