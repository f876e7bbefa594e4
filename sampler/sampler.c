// defines: sampler_kind_parse, sampler_config_default, sampler_init, sampler_set_progress, sampler_set_noise,
//          sampler_set_steps, sampler_run, sampler_free
#include "sampler.h"

#include <math.h>
#include <string.h>

int sampler_kind_parse(const char *name, SamplerKind *out) {
    if (!strcmp(name, "ddpm")) { *out = SAMPLER_DDPM; return 0; }
    if (!strcmp(name, "ddim")) { *out = SAMPLER_DDIM; return 0; }
    return -1;
}

SamplerConfig sampler_config_default(void) {
    SamplerConfig c = {
        .kind = SAMPLER_DDPM, .num_steps = 250, .cfg_scale = 1.0f, .eta = 0.0f,
        .clip_denoised = 1, .learn_sigma = 1, .num_classes = 1000, .seed = 0,
    };
    return c;
}

int sampler_set_steps(Sampler *s, const Diffusion *base, int num_steps, MalaErr *err) {
    int steps = num_steps > 0 ? num_steps : base->num_timesteps;
    Diffusion sp;
    if (diffusion_init_respaced(&sp, base, steps, err)) return -1;
    diffusion_free(&s->sp);
    s->sp = sp;
    s->cfg.num_steps = steps;
    return 0;
}

int sampler_init(Sampler *s, const Diffusion *base, const SamplerConfig *cfg, int max_n, int C, int S,
                 DenoiseFn denoise, void *denoise_ctx, MalaErr *err) {
    memset(s, 0, sizeof *s);
    if (max_n < 1 || C < 1 || S < 1) return mala_errf(err, "sampler: bad shape n=%d C=%d S=%d", max_n, C, S);
    if (!denoise) return mala_errf(err, "sampler: no denoise callback");
    if (cfg->num_classes < 0) return mala_errf(err, "sampler: num_classes %d < 0", cfg->num_classes);
    s->cfg = *cfg;
    if (sampler_set_steps(s, base, cfg->num_steps, err)) { memset(s, 0, sizeof *s); return -1; }
    s->max_n = max_n; s->C = C; s->S = S;
    s->cout = cfg->learn_sigma ? 2 * C : C;
    s->hw = (size_t)S * S;
    s->denoise = denoise; s->denoise_ctx = denoise_ctx;
    rng_seed(&s->rng, cfg->seed);
    size_t img = (size_t)C * s->hw;
    s->xin = xmalloc(2 * (size_t)max_n * img * sizeof(float));
    s->out = xmalloc(2 * (size_t)max_n * s->cout * s->hw * sizeof(float));
    s->tin = xmalloc(2 * (size_t)max_n * sizeof(float));
    s->yin = xmalloc(2 * (size_t)max_n * sizeof(int32_t));
    s->x0 = xmalloc((size_t)max_n * img * sizeof(float));
    s->noise = xmalloc((size_t)max_n * img * sizeof(float));
    return 0;
}

void sampler_set_progress(Sampler *s, SamplerStepFn on_step, void *ctx) { s->on_step = on_step; s->step_ctx = ctx; }
void sampler_set_noise(Sampler *s, SamplerNoiseFn noise_fn, void *ctx) { s->noise_fn = noise_fn; s->noise_ctx = ctx; }

void sampler_free(Sampler *s) {
    diffusion_free(&s->sp);
    free(s->xin); free(s->out); free(s->tin); free(s->yin); free(s->x0); free(s->noise);
    memset(s, 0, sizeof *s);
}

// One step at respaced index i for the whole batch: x (in/out), x0 (out).
//   eps    = guided eps (or the conditional one)
//   x0     = sqrt(1/abar) x - sqrt(1/abar - 1) eps, clipped
//   DDPM:  x' = coef1 x0 + coef2 x + [i > 0] exp(lv / 2) z, lv learned-range or posterior
//   DDIM:  eps' = (sqrt(1/abar) x - x0) / sqrt(1/abar - 1)
//          x' = sqrt(abar_prev) x0 + sqrt(1 - abar_prev - sigma^2) eps' + [i > 0] sigma z
static void sampler_step(Sampler *s, float *x, int n, int i, int guided, const float *z) {
    const Diffusion *d = &s->sp;
    const int C = s->C, cout = s->cout;
    const size_t hw = s->hw;
    const double w = s->cfg.cfg_scale;
    const double sra = d->sqrt_recip_alphas_cumprod[i], srm1 = d->sqrt_recipm1_alphas_cumprod[i];
    const double c1 = d->posterior_mean_coef1[i], c2 = d->posterior_mean_coef2[i];
    const double ab = d->alphas_cumprod[i], abp = d->alphas_cumprod_prev[i];
    const double eta = s->cfg.eta;
    const double sigma = eta * sqrt((1 - abp) / (1 - ab)) * sqrt(1 - ab / abp);
    const double sqrt_abp = sqrt(abp), c_eps = sqrt(1 - abp - sigma * sigma);
    const double fixed_std = exp(0.5 * d->posterior_log_variance_clipped[i]);
    const int ddim = s->cfg.kind == SAMPLER_DDIM, clip = s->cfg.clip_denoised;
    for (int b = 0; b < n; b++) {
        for (int c = 0; c < C; c++) {
            const size_t o = ((size_t)b * C + c) * hw;
            const float *ec = s->out + ((size_t)b * cout + c) * hw;
            const float *eu = guided ? s->out + ((size_t)(n + b) * cout + c) * hw : NULL;
            const float *v = s->cfg.learn_sigma ? s->out + ((size_t)b * cout + C + c) * hw : NULL;
            float *xb = x + o, *x0b = s->x0 + o;
            const float *zb = z ? z + o : NULL;
            for (size_t p = 0; p < hw; p++) {
                double eps = guided ? (double)eu[p] + w * ((double)ec[p] - eu[p]) : (double)ec[p];
                double xv = xb[p];
                double px0 = sra * xv - srm1 * eps;
                if (clip) px0 = px0 < -1.0 ? -1.0 : (px0 > 1.0 ? 1.0 : px0);
                double xn;
                if (ddim) {
                    double e2 = (sra * xv - px0) / srm1;
                    xn = px0 * sqrt_abp + c_eps * e2;
                    if (zb) xn += sigma * zb[p];
                } else {
                    xn = c1 * px0 + c2 * xv;
                    if (zb) {
                        double sd = v ? exp(0.5 * diffusion_learned_log_var(d, i, v[p])) : fixed_std;
                        xn += sd * zb[p];
                    }
                }
                x0b[p] = (float)px0;
                xb[p] = (float)xn;
            }
        }
    }
}

int sampler_run(Sampler *s, float *x, const int32_t *y, int n, MalaErr *err) {
    if (n < 1 || n > s->max_n) return mala_errf(err, "sampler: batch %d outside 1..%d", n, s->max_n);
    for (int b = 0; b < n; b++)
        if (y[b] < 0 || y[b] > s->cfg.num_classes)
            return mala_errf(err, "sampler: label %d of sample %d outside 0..%d (%d = null)", y[b], b,
                             s->cfg.num_classes, s->cfg.num_classes);
    if (s->cfg.kind != SAMPLER_DDPM && s->cfg.kind != SAMPLER_DDIM)
        return mala_errf(err, "sampler: unknown kind %d", (int)s->cfg.kind);
    const int guided = s->cfg.cfg_scale != 1.0f;
    const int nb = guided ? 2 * n : n;
    const size_t img = (size_t)s->C * s->hw, count = (size_t)n * img;
    const int N = s->sp.num_timesteps;
    for (int b = 0; b < n; b++) {
        s->yin[b] = y[b];
        if (guided) s->yin[n + b] = s->cfg.num_classes;
    }
    for (int step = 0; step < N; step++) {
        const int i = N - 1 - step;
        const float tval = (float)s->sp.timestep_map[i];
        for (int b = 0; b < nb; b++) s->tin[b] = tval;
        const float *xin = x;
        if (guided) {
            memcpy(s->xin, x, count * sizeof(float));
            memcpy(s->xin + count, x, count * sizeof(float));
            xin = s->xin;
        }
        s->denoise(s->denoise_ctx, s->out, xin, s->tin, s->yin, nb);
        s->denoise_calls++;
        const int noisy = i > 0 && (s->cfg.kind == SAMPLER_DDPM || s->cfg.eta > 0.0f);
        if (noisy) {
            if (s->noise_fn) s->noise_fn(s->noise_ctx, s->noise, count, step);
            else rng_normal_fill(&s->rng, s->noise, count);
        }
        sampler_step(s, x, n, i, guided, noisy ? s->noise : NULL);
        if (s->on_step && s->on_step(s->step_ctx, step, N, s->x0)) return SAMPLER_CANCELLED;
    }
    return 0;
}
