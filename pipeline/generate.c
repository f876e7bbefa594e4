// defines: gen_opts_default, gen_cfg_channels_parse, gen_cfg_channels_str, gen_cfg_interval_parse,
//          gen_cfg_interval_str, generator_open, generator_new, generator_image_floats, generator_close,
//          generator_noise, generator_run, generator_run_init, gen_guidance_for
#include "pipeline/generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/vae.h"   // defines: vae_free

GenOpts gen_opts_default(void) {
    GenOpts o = {SAMPLER_DDPM, 250, 4.0f, 0.0f, 1, 0, 0.0f, 0.0f};
    return o;
}

int gen_cfg_channels_parse(const char *s, int *out) {
    if (!strcmp(s, "all")) { *out = 0; return 0; }
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > 1024) return -1;
    *out = (int)v;
    return 0;
}

const char *gen_cfg_channels_str(int cfg_channels, int C, char *buf, size_t cap) {
    if (cfg_channels <= 0 || cfg_channels >= C) snprintf(buf, cap, "all");
    else snprintf(buf, cap, "%d", cfg_channels);
    return buf;
}

int gen_cfg_interval_parse(const char *s, float *lo, float *hi) {
    if (!strcmp(s, "none")) { *lo = *hi = 0.0f; return 0; }
    char *end, *end2;
    double a = strtod(s, &end);
    if (end == s || *end != ',') return -1;
    double b = strtod(end + 1, &end2);
    if (end2 == end + 1 || *end2 || !(a >= 0) || !(b > a) || b > 1e30) return -1;
    *lo = (float)a;
    *hi = (float)b;
    return 0;
}

const char *gen_cfg_interval_str(const GenOpts *o, char *buf, size_t cap) {
    if (o->cfg_hi <= 0) snprintf(buf, cap, "none");
    else snprintf(buf, cap, "%.9g,%.9g", o->cfg_lo, o->cfg_hi);
    return buf;
}

// The samplers' DenoiseFn (sampler.h): every array is already in the network's backend memory.
static void denoise(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n) {
    net_forward(ctx, out, x, t, y, n);
}

size_t generator_image_floats(const Generator *g) {
    const NetConfig *c = &g->net->cfg;
    return (size_t)c->in_channels * c->image_size * c->image_size;
}

// Everything but the network and the class names.
static void generator_wire(Generator *g, int max_batch) {
    const NetConfig *c = &g->net->cfg;
    const Backend *be = g->net->be;
    MalaErr err;
    g->max_batch = max_batch;
    diffusion_init_dit(&g->base);
    size_t per = generator_image_floats(g);
    g->d_x = be->alloc((size_t)max_batch * per * sizeof(float));
    g->x0_host = xmalloc((size_t)max_batch * per * sizeof(float));
    SamplerConfig sc = sampler_config_default();
    sc.learn_sigma = c->learn_sigma;
    sc.num_classes = c->num_classes;
    if (sampler_init(&g->s, be, &g->base, &sc, max_batch, c->in_channels, c->image_size, denoise, g->net, &err))
        FATAL("%s", err.msg);
}

int generator_open(Generator *g, const char *path, const Backend *be, int max_batch, MalaErr *err) {
    return generator_open_mode(g, path, be, max_batch, NET_INFER, err);
}

int generator_open_mode(Generator *g, const char *path, const Backend *be, int max_batch, int mode, MalaErr *err) {
    memset(g, 0, sizeof *g);
    g->net = ckpt_load_model_mode(path, be, 2 * max_batch, mode, &g->classes, err);  // 2x: guided batches
    if (!g->net) return -1;
    generator_wire(g, max_batch);
    return 0;
}

void generator_new(Generator *g, const NetConfig *c, const ClassNames *cn, const Backend *be, int max_batch) {
    memset(g, 0, sizeof *g);
    g->net = net_create(c, be, 2 * max_batch, NET_INFER);
    class_names_copy(&g->classes, cn);
    generator_wire(g, max_batch);
}

void generator_close(Generator *g) {
    if (!g->net) return;
    vae_free(g->vae);
    sampler_free(&g->s);
    diffusion_free(&g->base);
    g->net->be->release(g->d_x);
    if (g->d_known) {  // inpainting's buffers, made by its first run
        g->net->be->release(g->d_known);
        g->net->be->release(g->d_mask);
        g->net->be->release(g->d_work);
    }
    free(g->x0_host);
    net_free(g->net);
    class_names_free(&g->classes);
    memset(g, 0, sizeof *g);
}

void generator_noise(const Generator *g, float *noise, uint64_t seed, int64_t first, int n) {
    size_t per = generator_image_floats(g);
    for (int i = 0; i < n; i++) {
        Rng r;
        rng_seed_stream(&r, seed, (uint64_t)(first + i));
        rng_normal_fill(&r, noise + (size_t)i * per, per);
    }
}

// Per-step noise: one stream per (image, step) of the backend's generator, under a seed distinct
// from the initial noise's (generator_noise uses stream = image index under `seed`).
static void step_noise(void *ctx, float *out, size_t count, int step) {
    Generator *g = ctx;
    size_t per = generator_image_floats(g);
    g->net->be->rand_normal(out, (int)(count / per), per, g->noise_seed ^ 0x9e3779b97f4a7c15ull,
                          (uint64_t)g->noise_first * 1024 + (uint64_t)step, 1024);
}

// The caller's on_step with the predicted x0 brought to the host.
static int host_step(void *ctx, int step, int nsteps, const float *x0) {
    Generator *g = ctx;
    size_t per = generator_image_floats(g);
    g->net->be->to_host(g->x0_host, x0, (size_t)g->run_n * per * sizeof(float));
    return g->user_step(g->user_ctx, step, nsteps, g->x0_host);
}

int generator_run(Generator *g, const GenOpts *o, float *x, const int32_t *y, int n, uint64_t seed, int64_t first,
                  SamplerStepFn on_step, void *ctx, MalaErr *err) {
    return generator_run_init(g, o, NULL, x, y, n, seed, first, on_step, ctx, err);
}

int generator_run_init(Generator *g, const GenOpts *o, const GenInit *in, float *x, const int32_t *y, int n,
                       uint64_t seed, int64_t first, SamplerStepFn on_step, void *ctx, MalaErr *err) {
    int T = g->base.num_timesteps;
    if (o->steps < 1 || o->steps > T) return mala_errf(err, "--steps %d: must be between 1 and %d", o->steps, T);
    if (n < 1 || n > g->max_batch) return mala_errf(err, "generator: batch %d outside 1..%d", n, g->max_batch);
    if (g->net->cfg.num_classes == 0 && o->cfg_scale != 1.0f)
        return mala_errf(err, "guidance %g: the model is unconditional (num_classes 0), and classifier-free guidance "
                         "needs a class-conditional one", (double)o->cfg_scale);
    for (int i = 0; i < n; i++)
        if (y[i] < 0 || y[i] > g->net->cfg.num_classes)
            return mala_errf(err, g->net->cfg.num_classes ? "label %d: the model has classes 0..%d"
                                                          : "label %d: the model is unconditional (label 0 only)",
                             y[i], g->net->cfg.num_classes - 1);
    if (g->s.sp.num_timesteps != o->steps && sampler_set_steps(&g->s, &g->base, o->steps, err)) return -1;
    g->s.cfg.kind = o->kind;
    g->s.cfg.cfg_scale = o->cfg_scale;
    g->s.cfg.cfg_channels = o->cfg_channels;
    g->s.cfg.cfg_lo = o->cfg_lo;
    g->s.cfg.cfg_hi = o->cfg_hi;
    g->s.cfg.eta = o->eta;
    g->s.cfg.clip_denoised = o->clip && !(g->net->cfg.latent_scale > 0);  // latents: never clipped
    g->noise_seed = seed;
    g->noise_first = first;
    g->run_n = n;
    g->user_step = on_step;
    g->user_ctx = ctx;
    sampler_set_noise(&g->s, step_noise, g);
    sampler_set_progress(&g->s, on_step ? host_step : NULL, g);
    if (gen_init_prepare(g, o, in, x, n, err)) return -1;
    if (o->blend && net_set_label_blend(g->net, o->blend_a, o->blend_b, o->blend_w, err)) return -1;
    const Backend *be = g->net->be;
    size_t bytes = (size_t)n * generator_image_floats(g) * sizeof(float);
    be->to_device(g->d_x, x, bytes);
    int rc = sampler_run(&g->s, g->d_x, y, n, err);
    net_clear_label_blend(g->net);
    sampler_set_init(&g->s, NULL);
    if (rc >= 0) be->to_host(x, g->d_x, bytes);
    return rc;
}

int gen_guidance_for(const NetConfig *c, float *cfg_scale, int given, const char *flag, MalaErr *err) {
    if (c->num_classes > 0) return 0;
    if (!given) {
        *cfg_scale = 1.0f;
        return 0;
    }
    if (*cfg_scale != 1.0f)
        return mala_errf(err, "%s %g: the model is unconditional (num_classes 0), and classifier-free guidance needs a "
                         "class-conditional one: drop %s (or give 1)", flag, (double)*cfg_scale, flag);
    return 0;
}
