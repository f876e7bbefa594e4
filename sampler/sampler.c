// defines: sampler_kind_parse, sampler_kind_name, sampler_kind_label, sampler_kind_list, sampler_config_default, sampler_init, sampler_set_progress, sampler_set_noise,
//          sampler_set_steps, sampler_step_coefs, sampler_process, sampler_run, sampler_free, sampler_set_init
#include "sampler/sampler.h"
#include "sampler/inpaint.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const SAMPLER_NAMES[SAMPLER_KIND_COUNT] = {"ddpm", "ddim", "dpm++2m"};

const char *sampler_kind_name(SamplerKind k) {
    return (int)k >= 0 && k < SAMPLER_KIND_COUNT ? SAMPLER_NAMES[k] : NULL;
}

static const char *const SAMPLER_LABELS[SAMPLER_KIND_COUNT] = {"DDPM", "DDIM", "DPM++2M"};

const char *sampler_kind_label(SamplerKind k) {
    return (int)k >= 0 && k < SAMPLER_KIND_COUNT ? SAMPLER_LABELS[k] : NULL;
}

const char *sampler_kind_list(void) {
    static char list[128];
    if (!list[0])
        for (int k = 0; k < SAMPLER_KIND_COUNT; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? "|" : "", SAMPLER_NAMES[k]);
    return list;
}

int sampler_kind_parse(const char *name, SamplerKind *out) {
    for (int k = 0; k < SAMPLER_KIND_COUNT; k++)
        if (!strcasecmp(name, SAMPLER_NAMES[k])) { *out = (SamplerKind)k; return 0; }
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
    Diffusion sp, sp_dpm;
    if (diffusion_init_respaced(&sp, base, steps, err)) return -1;
    if (diffusion_init_respaced(&sp_dpm, base, steps < base->num_timesteps ? steps + 1 : steps, err)) {
        diffusion_free(&sp);
        return -1;
    }
    diffusion_free(&s->sp);
    diffusion_free(&s->sp_dpm);
    s->sp = sp;
    s->sp_dpm = sp_dpm;
    s->cfg.num_steps = steps;
    return 0;
}

int sampler_init(Sampler *s, const Backend *be, const Diffusion *base, const SamplerConfig *cfg, int max_n, int C,
                 int S, DenoiseFn denoise, void *denoise_ctx, MalaErr *err) {
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
    s->be = be;
    size_t img = (size_t)C * s->hw;
    s->xin = be->alloc(2 * (size_t)max_n * img * sizeof(float));
    s->out = be->alloc(2 * (size_t)max_n * s->cout * s->hw * sizeof(float));
    s->tin = be->alloc(2 * (size_t)max_n * sizeof(float));
    s->yin = be->alloc(2 * (size_t)max_n * sizeof(int32_t));
    s->x0 = be->alloc((size_t)max_n * img * sizeof(float));
    s->x0_prev = be->alloc((size_t)max_n * img * sizeof(float));
    s->noise = be->alloc((size_t)max_n * img * sizeof(float));
    s->y_host = xmalloc(2 * (size_t)max_n * sizeof(int32_t));
    return 0;
}

void sampler_set_init(Sampler *s, const SamplerInit *in) {
    if (in) s->init = *in;
    else memset(&s->init, 0, sizeof s->init);
}

void sampler_set_progress(Sampler *s, SamplerStepFn on_step, void *ctx) { s->on_step = on_step; s->step_ctx = ctx; }
void sampler_set_noise(Sampler *s, SamplerNoiseFn noise_fn, void *ctx) { s->noise_fn = noise_fn; s->noise_ctx = ctx; }

void sampler_free(Sampler *s) {
    diffusion_free(&s->sp);
    diffusion_free(&s->sp_dpm);
    if (s->be) {
        const Backend *be = s->be;
        be->release(s->xin); be->release(s->out); be->release(s->tin); be->release(s->yin);
        be->release(s->x0); be->release(s->x0_prev); be->release(s->noise);
    }
    free(s->y_host);
    memset(s, 0, sizeof *s);
}

// log(alpha / sigma) of the discrete process at abar
static double half_log_snr(double ab) { return 0.5 * (log(ab) - log1p(-ab)); }

// DPM-Solver++(2M) at index i (sampler.h): the combination x' = c_x x + c_x0 x0 + c_prev x0_prev.
static void dpmpp_2m_coefs(SamplerStepCoefs *k, const Diffusion *d, int steps, int i) {
    const int last = d->num_timesteps > steps ? 1 : 0;
    if (i <= last) { k->c_x0 = 1.0; return; }  // to sigma = 0: first order gives x0 itself
    const double ab_s = d->alphas_cumprod[i], ab_t = d->alphas_cumprod[i - 1];
    const double alpha_t = sqrt(ab_t), h = half_log_snr(ab_t) - half_log_snr(ab_s);
    const double a = -alpha_t * expm1(-h);
    k->c_x = sqrt((1 - ab_t) / (1 - ab_s));
    if (i == d->num_timesteps - 1) { k->c_x0 = a; return; }  // first step: no history yet
    const double r = (half_log_snr(ab_s) - half_log_snr(d->alphas_cumprod[i + 1])) / h;
    k->c_x0 = a * (1 + 0.5 / r);
    k->c_prev = -a * 0.5 / r;
}

SamplerStepCoefs sampler_step_coefs(const Diffusion *d, const SamplerConfig *cfg, int i, int guided, int noisy) {
    SamplerStepCoefs k = {
        .sra = d->sqrt_recip_alphas_cumprod[i], .srm1 = d->sqrt_recipm1_alphas_cumprod[i],
        .w = cfg->cfg_scale, .guided = guided, .clip = cfg->clip_denoised, .learn_sigma = cfg->learn_sigma,
        .noise = STEP_NOISE_NONE, .guide_c = cfg->cfg_channels,
    };
    if (cfg->kind == SAMPLER_DDIM) {
        const double ab = d->alphas_cumprod[i], abp = d->alphas_cumprod_prev[i];
        const double sigma = cfg->eta * sqrt((1 - abp) / (1 - ab)) * sqrt(1 - ab / abp);
        k.c_x0 = sqrt(abp);
        k.c_eps = sqrt(1 - abp - sigma * sigma);
        if (noisy) { k.noise = STEP_NOISE_FIXED; k.sigma = sigma; }
    } else if (cfg->kind == SAMPLER_DPMPP_2M) {
        dpmpp_2m_coefs(&k, d, cfg->num_steps, i);
    } else {
        k.c_x0 = d->posterior_mean_coef1[i];
        k.c_x = d->posterior_mean_coef2[i];
        if (noisy && cfg->learn_sigma) {
            k.noise = STEP_NOISE_LEARNED;
            k.min_log = d->posterior_log_variance_clipped[i];
            k.max_log = d->log_betas[i];
        } else if (noisy) {
            k.noise = STEP_NOISE_FIXED;
            k.sigma = exp(0.5 * d->posterior_log_variance_clipped[i]);
        }
    }
    return k;
}

const Diffusion *sampler_process(const Sampler *s) {
    return s->cfg.kind == SAMPLER_DPMPP_2M ? &s->sp_dpm : &s->sp;
}

// One network evaluation and update of x from index i (step: its place in the schedule, for the
// noise; pass: the resampling pass, 0 first; first: no multistep history yet).
static void run_step(Sampler *s, float *x, int n, int i, int step, int pass, int first) {
    const Backend *be = s->be;
    const Diffusion *d = sampler_process(s);
    const double sigma = d->sqrt_recipm1_alphas_cumprod[i];  // --cfg-interval: guided where sigma in (lo, hi]
    const int guided = s->cfg.cfg_scale != 1.0f &&
                       (s->cfg.cfg_hi <= 0 || (sigma > s->cfg.cfg_lo && sigma <= s->cfg.cfg_hi));
    const int nb = guided ? 2 * n : n;
    const size_t count = (size_t)n * s->C * s->hw;
    be->fill(s->tin, (float)d->timestep_map[i], (size_t)nb);
    const float *xin = x;
    if (guided) {
        be->copy(s->xin, x, count * sizeof(float));
        be->copy(s->xin + count, x, count * sizeof(float));
        xin = s->xin;
    }
    s->denoise(s->denoise_ctx, s->out, xin, s->tin, s->yin, nb);
    s->denoise_calls++;
    const int noisy = i > 0 && (s->cfg.kind == SAMPLER_DDPM || (s->cfg.kind == SAMPLER_DDIM && s->cfg.eta > 0.0f));
    if (noisy) {
        if (pass > 0) inpaint_draw(s, s->noise, count, step, 3 * pass);  // a repeated step's own noise
        else if (s->noise_fn) s->noise_fn(s->noise_ctx, s->noise, count, step);
        else be->rand_normal(s->noise, 1, count, s->cfg.seed, s->runs * 1024 + step, 1);
    }
    SamplerStepCoefs k = sampler_step_coefs(d, &s->cfg, i, guided, noisy);
    if (first && k.c_prev != 0.0) {  // a multistep solver started mid-schedule: first order, c_x0 = a
        k.c_x0 += k.c_prev;
        k.c_prev = 0.0;
    }
    float *prev = s->x0_prev;
    s->x0_prev = s->x0;  // this step's x0 is the next step's history
    s->x0 = prev;
    be->sampler_step(x, s->x0, s->x0_prev, s->out, s->noise, &k, n, s->C, s->hw);
}

int sampler_run(Sampler *s, float *x, const int32_t *y, int n, MalaErr *err) {
    if (n < 1 || n > s->max_n) return mala_errf(err, "sampler: batch %d outside 1..%d", n, s->max_n);
    for (int b = 0; b < n; b++)
        if (y[b] < 0 || y[b] > s->cfg.num_classes)
            return mala_errf(err, "sampler: label %d of sample %d outside 0..%d (%d = null)", y[b], b,
                             s->cfg.num_classes, s->cfg.num_classes);
    if ((int)s->cfg.kind < 0 || s->cfg.kind >= SAMPLER_KIND_COUNT)
        return mala_errf(err, "sampler: unknown kind %d", (int)s->cfg.kind);
    const int N = s->sp.num_timesteps, top = sampler_process(s)->num_timesteps - 1;  // N steps (sp has N points)
    const SamplerInit *in = &s->init;
    if (in->skip < 0 || in->skip >= N)
        return mala_errf(err, "sampler: %d of %d steps skipped (image-to-image runs at least one)", in->skip, N);
    if (in->known && in->resample > 0 && s->cfg.kind == SAMPLER_DPMPP_2M)
        return mala_errf(err, "sampler: resampling jumps need DDPM or DDIM (DPM-Solver++ is multistep)");
    const int guided = s->cfg.cfg_scale != 1.0f;
    for (int b = 0; b < n; b++) {
        s->y_host[b] = y[b];
        s->y_host[n + b] = s->cfg.num_classes;
    }
    s->be->to_device(s->yin, s->y_host, (size_t)(guided ? 2 * n : n) * sizeof(int32_t));
    for (int step = in->skip; step < N; step++) {
        const int i = top - step;
        for (int j = 0;; j++) {
            run_step(s, x, n, i, step, j, step == in->skip && j == 0);
            if (!in->known) break;
            inpaint_merge(s, x, n, i, step, j);
            if (j >= in->resample || i <= sampler_last_index(s)) break;
            inpaint_jump(s, x, n, i, step, j);
        }
        if (s->on_step && s->on_step(s->step_ctx, step - in->skip, N - in->skip, s->x0)) {
            s->runs++;
            return SAMPLER_CANCELLED;
        }
    }
    s->runs++;
    return 0;
}
