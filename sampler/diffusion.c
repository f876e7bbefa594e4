// defines: beta_schedule_parse, beta_schedule_name, diffusion_make_betas, diffusion_init,
//          diffusion_init_from_betas, diffusion_init_dit, diffusion_free, diffusion_space_timesteps,
//          diffusion_init_respaced, diffusion_q_sample, diffusion_q_posterior_mean,
//          diffusion_p_mean_variance, diffusion_training_loss
#include "sampler/diffusion.h"

#include <string.h>

#include "core/backend.h"

#define N_TABLES 14   // double arrays of length T in Diffusion

// ---------------------------------------------------------------------------------------------
// Schedules

int beta_schedule_parse(const char *name, BetaSchedule *out) {
    if (!strcmp(name, "linear")) { *out = BETA_LINEAR; return 0; }
    if (!strcmp(name, "cosine") || !strcmp(name, "squaredcos_cap_v2")) { *out = BETA_COSINE; return 0; }
    return -1;
}

const char *beta_schedule_name(BetaSchedule s) { return s == BETA_COSINE ? "cosine" : "linear"; }

static double cosine_alpha_bar(double t) {
    // math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2, evaluated left to right like Python
    double c = cos((t + 0.008) / 1.008 * 3.141592653589793 / 2);
    return c * c;
}

int diffusion_make_betas(double *betas, BetaSchedule s, int T, MalaErr *err) {
    if (T < 1) return mala_errf(err, "diffusion: number of timesteps %d must be >= 1", T);
    if (s == BETA_LINEAR) {
        // np.linspace(start, stop, T): i * step + start, the last element exactly stop
        double scale = 1000.0 / T;
        double start = scale * 0.0001, stop = scale * 0.02;
        if (stop > 1.0) return mala_errf(err, "diffusion: linear schedule with T = %d has beta > 1 (T >= 20 needed)", T);
        if (T == 1) { betas[0] = start; return 0; }
        double step = (stop - start) / (T - 1);
        for (int i = 0; i < T; i++) betas[i] = (double)i * step + start;
        betas[T - 1] = stop;
        return 0;
    }
    if (s == BETA_COSINE) {
        for (int i = 0; i < T; i++) {
            double t1 = (double)i / T, t2 = (double)(i + 1) / T;
            double b = 1 - cosine_alpha_bar(t2) / cosine_alpha_bar(t1);
            betas[i] = b < 0.999 ? b : 0.999;
        }
        return 0;
    }
    return mala_errf(err, "diffusion: unknown beta schedule %d", (int)s);
}

// ---------------------------------------------------------------------------------------------
// Tables

// The per-timestep rows the backend ops read (diffusion_math.h), from the tables and timestep_map.
static void fill_coefs(Diffusion *d) {
    for (int i = 0; i < d->num_timesteps; i++) {
        double *k = d->coefs + (size_t)i * DIFF_COEFS;
        k[DC_SQRT_AB] = d->sqrt_alphas_cumprod[i];
        k[DC_SQRT_1M_AB] = d->sqrt_one_minus_alphas_cumprod[i];
        k[DC_SQRT_RECIP_AB] = d->sqrt_recip_alphas_cumprod[i];
        k[DC_SQRT_RECIPM1_AB] = d->sqrt_recipm1_alphas_cumprod[i];
        k[DC_POST_C1] = d->posterior_mean_coef1[i];
        k[DC_POST_C2] = d->posterior_mean_coef2[i];
        k[DC_POST_LOGVAR] = d->posterior_log_variance_clipped[i];
        k[DC_LOG_BETA] = d->log_betas[i];
        k[DC_TIMESTEP] = d->timestep_map[i];
    }
}

int diffusion_init_from_betas(Diffusion *d, const double *betas, int T, MalaErr *err) {
    memset(d, 0, sizeof *d);
    if (T < 1) return mala_errf(err, "diffusion: number of timesteps %d must be >= 1", T);
    for (int i = 0; i < T; i++)
        if (!(betas[i] > 0.0 && betas[i] <= 1.0))
            return mala_errf(err, "diffusion: beta[%d] = %g outside (0, 1]", i, betas[i]);

    d->num_timesteps = T;
    d->original_num_timesteps = T;
    d->vb_scale = T / 1000.0;
    d->mem_ = xmalloc((size_t)(N_TABLES + DIFF_COEFS) * T * sizeof(double));
    d->coefs = d->mem_ + (size_t)N_TABLES * T;
    double **tab[N_TABLES] = {
        &d->betas, &d->log_betas, &d->alphas_cumprod, &d->alphas_cumprod_prev, &d->alphas_cumprod_next,
        &d->sqrt_alphas_cumprod, &d->sqrt_one_minus_alphas_cumprod, &d->log_one_minus_alphas_cumprod,
        &d->sqrt_recip_alphas_cumprod, &d->sqrt_recipm1_alphas_cumprod,
        &d->posterior_variance, &d->posterior_log_variance_clipped,
        &d->posterior_mean_coef1, &d->posterior_mean_coef2,
    };
    for (int k = 0; k < N_TABLES; k++) *tab[k] = d->mem_ + (size_t)k * T;
    d->timestep_map = xmalloc((size_t)T * sizeof(int32_t));
    for (int i = 0; i < T; i++) d->timestep_map[i] = i;

    double acc = 1.0;
    for (int i = 0; i < T; i++) {
        d->betas[i] = betas[i];
        d->log_betas[i] = log(betas[i]);
        acc *= 1.0 - betas[i];                       // np.cumprod(1 - betas), sequential
        d->alphas_cumprod[i] = acc;
    }
    for (int i = 0; i < T; i++) {
        double ab = d->alphas_cumprod[i];
        double abp = i > 0 ? d->alphas_cumprod[i - 1] : 1.0;
        double alpha = 1.0 - betas[i];
        d->alphas_cumprod_prev[i] = abp;
        d->alphas_cumprod_next[i] = i + 1 < T ? d->alphas_cumprod[i + 1] : 0.0;
        d->sqrt_alphas_cumprod[i] = sqrt(ab);
        d->sqrt_one_minus_alphas_cumprod[i] = sqrt(1.0 - ab);
        d->log_one_minus_alphas_cumprod[i] = log(1.0 - ab);
        d->sqrt_recip_alphas_cumprod[i] = sqrt(1.0 / ab);
        d->sqrt_recipm1_alphas_cumprod[i] = sqrt(1.0 / ab - 1);
        d->posterior_variance[i] = betas[i] * (1.0 - abp) / (1.0 - ab);
        d->posterior_mean_coef1[i] = betas[i] * sqrt(abp) / (1.0 - ab);
        d->posterior_mean_coef2[i] = (1.0 - abp) * sqrt(alpha) / (1.0 - ab);
    }
    // log(append(pv[1], pv[1:])): the posterior variance is 0 at t = 0. A one-step process has no
    // pv[1] (ADM fails there); its only step adds no noise, so log(beta_0) keeps it finite.
    for (int i = 0; i < T; i++) {
        double pv = i > 0 ? d->posterior_variance[i] : (T > 1 ? d->posterior_variance[1] : betas[0]);
        d->posterior_log_variance_clipped[i] = log(pv);
    }
    fill_coefs(d);
    return 0;
}

int diffusion_init(Diffusion *d, BetaSchedule s, int T, MalaErr *err) {
    memset(d, 0, sizeof *d);
    if (T < 1) return mala_errf(err, "diffusion: number of timesteps %d must be >= 1", T);
    double *betas = xmalloc((size_t)T * sizeof(double));
    int rc = diffusion_make_betas(betas, s, T, err);
    if (rc == 0) rc = diffusion_init_from_betas(d, betas, T, err);
    free(betas);
    if (rc == 0) d->schedule = s;
    return rc;
}

void diffusion_init_dit(Diffusion *d) {
    MalaErr err;
    if (diffusion_init(d, BETA_LINEAR, 1000, &err)) FATAL("%s", err.msg);
}

void diffusion_free(Diffusion *d) {
    free(d->mem_);
    free(d->timestep_map);
    memset(d, 0, sizeof *d);
}

// Python's round() of a double: nearest, ties to even.
static long round_half_even(double x) {
    double f = floor(x), r = x - f;
    long i = (long)f;
    if (r > 0.5) return i + 1;
    if (r < 0.5) return i;
    return (i % 2 == 0) ? i : i + 1;
}

int diffusion_space_timesteps(int32_t *out, int T, int n, MalaErr *err) {
    if (T < 1 || n < 1 || n > T)
        return mala_errf(err, "diffusion: cannot respace %d timesteps into %d steps (need 1 <= steps <= %d)", T, n, T);
    if (n == 1) { out[0] = T - 1; return 0; }
    double frac_stride = (double)(T - 1) / (double)(n - 1);
    double cur = 0.0;
    for (int i = 0; i < n; i++) {
        out[i] = (int32_t)round_half_even(cur);
        cur += frac_stride;
    }
    return 0;
}

int diffusion_init_respaced(Diffusion *d, const Diffusion *base, int n, MalaErr *err) {
    memset(d, 0, sizeof *d);
    int T = base->num_timesteps;
    int32_t *ts = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (diffusion_space_timesteps(ts, T, n, err)) { free(ts); return -1; }
    double *betas = xmalloc((size_t)n * sizeof(double));
    double last = 1.0;
    for (int i = 0; i < n; i++) {
        double ab = base->alphas_cumprod[ts[i]];
        betas[i] = 1 - ab / last;
        last = ab;
    }
    int rc = diffusion_init_from_betas(d, betas, n, err);
    free(betas);
    if (rc == 0) {
        for (int i = 0; i < n; i++) d->timestep_map[i] = base->timestep_map[ts[i]];
        fill_coefs(d);
        d->original_num_timesteps = base->original_num_timesteps;
        d->vb_scale = base->vb_scale;
        d->schedule = base->schedule;
    }
    free(ts);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// Forward process and posterior

void diffusion_q_sample(const Diffusion *d, float *xt, const float *x0, const float *noise,
                        const int32_t *t, int n, size_t per) {
    for (int b = 0; b < n; b++) {
        double a = d->sqrt_alphas_cumprod[t[b]], s = d->sqrt_one_minus_alphas_cumprod[t[b]];
        const float *xb = x0 + b * per, *nb = noise + b * per;
        float *ob = xt + b * per;
        for (size_t i = 0; i < per; i++) ob[i] = (float)(a * xb[i] + s * nb[i]);
    }
}

void diffusion_q_posterior_mean(const Diffusion *d, float *mean, const float *x0, const float *xt,
                                const int32_t *t, int n, size_t per) {
    for (int b = 0; b < n; b++) {
        double c1 = d->posterior_mean_coef1[t[b]], c2 = d->posterior_mean_coef2[t[b]];
        const float *x0b = x0 + b * per, *xtb = xt + b * per;
        float *mb = mean + b * per;
        for (size_t i = 0; i < per; i++) mb[i] = (float)(c1 * x0b[i] + c2 * xtb[i]);
    }
}

void diffusion_p_mean_variance(const Diffusion *d, float *mean, float *log_var, float *pred_x0,
                               const float *model_out, const float *xt, const int32_t *t,
                               int n, int C, size_t hw, int learn_sigma, int clip) {
    int cout = learn_sigma ? 2 * C : C;
    for (int b = 0; b < n; b++) {
        int tb = t[b];
        double sra = d->sqrt_recip_alphas_cumprod[tb], srm1 = d->sqrt_recipm1_alphas_cumprod[tb];
        double c1 = d->posterior_mean_coef1[tb], c2 = d->posterior_mean_coef2[tb];
        double fixed_lv = d->posterior_log_variance_clipped[tb];
        for (int c = 0; c < C; c++) {
            size_t o = ((size_t)b * C + c) * hw;
            const float *eps = model_out + ((size_t)b * cout + c) * hw;
            const float *v = learn_sigma ? model_out + ((size_t)b * cout + C + c) * hw : NULL;
            for (size_t i = 0; i < hw; i++) {
                double x = xt[o + i];
                double px0 = sra * x - srm1 * eps[i];
                if (clip) px0 = px0 < -1.0 ? -1.0 : (px0 > 1.0 ? 1.0 : px0);
                if (pred_x0) pred_x0[o + i] = (float)px0;
                if (mean) mean[o + i] = (float)(c1 * px0 + c2 * x);
                if (log_var) log_var[o + i] = (float)(v ? learned_log_var(v[i], fixed_lv, d->log_betas[tb]) : fixed_lv);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Training loss on host memory: the CPU backend's diffusion_loss op.

double diffusion_training_loss(const Diffusion *d, float *grad, double *loss_per, double *mse_per,
                               double *vb_per, const float *model_out, const float *x0,
                               const float *noise, const int32_t *t, int n, int C, size_t hw,
                               int learn_sigma) {
    double *mse = xmalloc(2 * (size_t)n * sizeof(double)), *vb = mse + n;
    float *g = grad ? grad : xmalloc((size_t)n * (learn_sigma ? 2 : 1) * C * hw * sizeof(float));
    backend_host()->diffusion_loss(g, mse, vb, model_out, x0, noise, t, d->coefs, d->vb_scale, n, C, hw, learn_sigma);
    double total = 0.0;
    for (int b = 0; b < n; b++) {
        if (mse_per) mse_per[b] = mse[b];
        if (vb_per) vb_per[b] = vb[b];
        if (loss_per) loss_per[b] = mse[b] + vb[b];
        total += mse[b] + vb[b];
    }
    if (!grad) free(g);
    free(mse);
    return total / n;
}
